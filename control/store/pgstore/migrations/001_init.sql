-- The write lease: one row. holder/epoch name the instance allowed to write
-- until expires_at (database clock). A takeover increments epoch.
CREATE TABLE lease (
    id         int PRIMARY KEY CHECK (id = 1),
    holder     text NOT NULL,
    epoch      bigint NOT NULL,
    expires_at timestamptz NOT NULL
);
INSERT INTO lease VALUES (1, '', 0, '-infinity');

CREATE TABLE counters (
    name  text PRIMARY KEY,
    value bigint NOT NULL
);
INSERT INTO counters VALUES ('sequence', 0);

CREATE TABLE revisions (
    seq             bigint PRIMARY KEY,
    id              text NOT NULL UNIQUE,
    idempotency_key text UNIQUE,
    doc             jsonb NOT NULL,
    snapshot        bytea NOT NULL
);

CREATE TABLE rollouts (
    seq  bigint PRIMARY KEY,
    id   text NOT NULL UNIQUE,
    open boolean NOT NULL,
    doc  jsonb NOT NULL
);
CREATE INDEX rollouts_open ON rollouts (seq) WHERE open;

-- fleet, deny: one document each (deny keeps its signed file in data).
CREATE TABLE singletons (
    name text PRIMARY KEY,
    doc  jsonb NOT NULL,
    data bytea
);

CREATE TABLE nodes (
    id      text PRIMARY KEY,
    doc     jsonb NOT NULL,
    seen_at timestamptz NOT NULL
);

-- The outbox: written in the transaction of the change it describes,
-- published after commit (NOTIFY rampart_events, and polled).
CREATE TABLE events (
    id      bigserial PRIMARY KEY,
    epoch   bigint NOT NULL,
    kind    text NOT NULL,
    subject text NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
