-- Fencing at commit. Every write transaction names the lease it writes
-- under (SET LOCAL rampart.fence_holder, rampart.fence_epoch); a deferred
-- constraint trigger on every fenced table checks, inside COMMIT, that
-- this lease is still the current one and unexpired by the database clock,
-- holding the lease row FOR SHARE until the commit ends. A takeover
-- updates that row, so it and a commit's check serialise: a commit of
-- epoch e either finishes before epoch e+1 begins or is refused. A row
-- written without the settings is refused too. Node status reports
-- (nodes) and the lease itself are not fenced.
CREATE FUNCTION rampart_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    h text := current_setting('rampart.fence_holder', true);
    e text := current_setting('rampart.fence_epoch', true);
BEGIN
    IF coalesce(e, '') = '' OR coalesce(h, '') = '' THEN
        RAISE EXCEPTION 'rampart fence: % written outside a fenced transaction (rampart.fence_holder and rampart.fence_epoch are not set)',
            TG_TABLE_NAME USING ERRCODE = 'RF001';
    END IF;
    PERFORM 1 FROM lease WHERE id = 1 AND holder = h AND epoch = e::bigint
        AND expires_at > clock_timestamp() FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'rampart fence: at commit, % does not hold the lease with epoch % unexpired (taken over or lapsed)',
            h, e USING ERRCODE = 'RF001';
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER fence AFTER INSERT OR UPDATE OR DELETE ON counters
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION rampart_fence();
CREATE CONSTRAINT TRIGGER fence AFTER INSERT OR UPDATE OR DELETE ON revisions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION rampart_fence();
CREATE CONSTRAINT TRIGGER fence AFTER INSERT OR UPDATE OR DELETE ON rollouts
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION rampart_fence();
CREATE CONSTRAINT TRIGGER fence AFTER INSERT OR UPDATE OR DELETE ON singletons
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION rampart_fence();
-- The outbox: inserts are fenced; pruning old events is housekeeping.
CREATE CONSTRAINT TRIGGER fence AFTER INSERT OR UPDATE ON events
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION rampart_fence();
