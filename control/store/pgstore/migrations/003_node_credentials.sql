-- Per-node credentials: the SHA-256 of each node's token (the token itself
-- is shown once, at enrolment, and never stored). A revoked credential
-- keeps its row (revoked_at set) so the refusal can say so. Fenced.
CREATE TABLE node_credentials (
    id           text PRIMARY KEY,
    token_sha256 text NOT NULL UNIQUE,
    enrolled_at  timestamptz NOT NULL,
    revoked_at   timestamptz
);
CREATE CONSTRAINT TRIGGER fence AFTER INSERT OR UPDATE OR DELETE ON node_credentials
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION rampart_fence();
