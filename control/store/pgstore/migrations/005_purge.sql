-- The cache purge channel (control/model.PurgeState): the purge rules still
-- listed (doc), the signed purge document built from them (file) and its
-- sequence. One row, written through the fenced write path; the sequence
-- may never go back, so nodes (which refuse a version that is not newer)
-- never see the channel stall behind an older write.
CREATE TABLE purge (
    id       integer PRIMARY KEY CHECK (id = 1),
    doc      jsonb   NOT NULL,
    file     bytea   NOT NULL,
    sequence bigint  NOT NULL CHECK (sequence >= 0)
);

CREATE FUNCTION purge_sequence_only_grows() RETURNS trigger AS $$
BEGIN
    IF NEW.sequence < OLD.sequence THEN
        RAISE EXCEPTION 'purge: sequence % would go back to %', OLD.sequence, NEW.sequence;
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER purge_sequence_only_grows BEFORE UPDATE ON purge
    FOR EACH ROW EXECUTE FUNCTION purge_sequence_only_grows();

-- Fenced like every table of configuration (002_fence.sql).
CREATE CONSTRAINT TRIGGER fence AFTER INSERT OR UPDATE OR DELETE ON purge
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION rampart_fence();
