-- The operator state of regions and platforms (control/model.RegionControl:
-- region drains and platform writers with their fencing epochs), written
-- through the fenced write path like every other change. max_writer_epoch
-- is the highest writer epoch in doc; a write may never lower it, so a
-- writer switch can never be undone by a stale writer.
CREATE TABLE region_control (
    id               integer PRIMARY KEY CHECK (id = 1),
    doc              jsonb   NOT NULL,
    max_writer_epoch bigint  NOT NULL DEFAULT 0 CHECK (max_writer_epoch >= 0)
);

CREATE FUNCTION region_control_epoch_only_grows() RETURNS trigger AS $$
BEGIN
    IF NEW.max_writer_epoch < OLD.max_writer_epoch THEN
        RAISE EXCEPTION 'region_control: max_writer_epoch % would go back to %', OLD.max_writer_epoch, NEW.max_writer_epoch;
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER region_control_epoch_only_grows BEFORE UPDATE ON region_control
    FOR EACH ROW EXECUTE FUNCTION region_control_epoch_only_grows();

-- Fenced like every table of configuration (002_fence.sql).
CREATE CONSTRAINT TRIGGER fence AFTER INSERT OR UPDATE OR DELETE ON region_control
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION rampart_fence();
