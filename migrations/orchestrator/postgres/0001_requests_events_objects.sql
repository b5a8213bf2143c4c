-- The orchestrator's store (seed 002). `request_events` is the source of truth: every
-- transition of every request, hash-chained per request; `requests` is the live state those
-- events rebuild (replay compares the two). Objects are stored once, by content id.
-- Server-made ids (req_…, tr_…) start with the time in hex, so new rows land at the end of
-- their indexes. Times are unix microseconds (BIGINT), compared exactly on both engines;
-- an event's `ts` is the RFC 3339 text its hash covers.

CREATE TABLE requests (
    request_id         TEXT    PRIMARY KEY,
    state              TEXT    NOT NULL,
    actor              TEXT    NOT NULL,
    -- Events so far: the last event's seq.
    version            BIGINT  NOT NULL,
    -- The last event's hash: the head of the request's chain.
    head_hash          TEXT    NOT NULL,
    plan_object        TEXT    NOT NULL,
    rollback_declared  BOOLEAN NOT NULL,
    risk_object        TEXT,
    risk_level         TEXT,
    forbidden          BOOLEAN,
    approvals_required BIGINT,
    trace_object       TEXT,
    trace_id           TEXT,
    trace_status       TEXT,
    reward_object      TEXT,
    approval_count     BIGINT  NOT NULL,
    evaluation_count   BIGINT  NOT NULL,
    -- Since when it waits for an approval (APPROVAL_PENDING).
    waiting_since      BIGINT,
    created_at         BIGINT    NOT NULL,
    updated_at         BIGINT    NOT NULL
);
CREATE INDEX requests_state_idx ON requests (state, request_id);
CREATE UNIQUE INDEX requests_trace_idx ON requests (trace_id);

CREATE TABLE request_events (
    request_id  TEXT   NOT NULL,
    seq         BIGINT NOT NULL,
    event_type  TEXT   NOT NULL,
    prev_state  TEXT,
    next_state  TEXT   NOT NULL,
    -- JCS text of the event's meta object.
    meta        TEXT   NOT NULL,
    ts          TEXT   NOT NULL,
    prev_hash   TEXT   NOT NULL,
    hash        TEXT   NOT NULL,
    PRIMARY KEY (request_id, seq)
);

-- The six objects, immutable, by the sha256 of their JCS bytes.
CREATE TABLE objects (
    content_id     TEXT   PRIMARY KEY,
    object_type    TEXT   NOT NULL,
    -- The object's own `id` field.
    object_id      TEXT   NOT NULL,
    schema_version TEXT   NOT NULL,
    body           TEXT   NOT NULL,
    created_at     BIGINT   NOT NULL
);

CREATE TABLE approvals (
    request_id     TEXT    NOT NULL,
    seq            BIGINT  NOT NULL,
    approval_object TEXT   NOT NULL,
    approval_id    TEXT    NOT NULL,
    approver       TEXT    NOT NULL,
    decision       TEXT    NOT NULL,
    -- A signature is accepted once, anywhere: a replayed approval is refused.
    signature      TEXT    NOT NULL UNIQUE,
    public_key     TEXT    NOT NULL,
    submitted_by   TEXT    NOT NULL,
    recorded_at    BIGINT    NOT NULL,
    PRIMARY KEY (request_id, seq)
);

-- Every vote: evaluations of requests and judgements of gold tasks (same rules, so the two
-- stay indistinguishable to the evaluator).
CREATE TABLE votes (
    vote_id         TEXT    PRIMARY KEY,
    -- The request, or the gold task, voted on.
    target_id       TEXT    NOT NULL,
    gold            BOOLEAN NOT NULL,
    -- The request event that recorded it (not for gold).
    seq             BIGINT,
    evaluator_id    TEXT    NOT NULL,
    eval_object     TEXT    NOT NULL,
    suite           TEXT    NOT NULL,
    score           DOUBLE PRECISION    NOT NULL,
    gate_passed     BOOLEAN NOT NULL,
    regression      BOOLEAN NOT NULL,
    suppressed      BOOLEAN NOT NULL,
    -- JSON array of the anti-abuse rules that fired.
    reason_codes    TEXT    NOT NULL,
    -- Gold judgements: whether it matched the known answer.
    gold_matched    BOOLEAN,
    voted_at        BIGINT    NOT NULL
);
CREATE INDEX votes_evaluator_idx ON votes (evaluator_id, voted_at);
CREATE INDEX votes_evaluator_target_idx ON votes (evaluator_id, target_id);
CREATE INDEX votes_target_idx ON votes (target_id, seq);

CREATE TABLE evaluators (
    evaluator_id           TEXT    PRIMARY KEY,
    version                BIGINT  NOT NULL,
    votes                  BIGINT  NOT NULL,
    gold_attempts          BIGINT  NOT NULL,
    gold_matches           BIGINT  NOT NULL,
    consecutive_mismatches BIGINT  NOT NULL,
    updated_at             BIGINT    NOT NULL
);

CREATE TABLE reputations (
    actor_id       TEXT    PRIMARY KEY,
    version        BIGINT  NOT NULL,
    rep            DOUBLE PRECISION    NOT NULL,
    last_reward_id TEXT    NOT NULL,
    updated_at     BIGINT    NOT NULL
);

-- Each declared suite's baseline (best passing score) and latest evaluation.
CREATE TABLE suites (
    suite                TEXT    PRIMARY KEY,
    baseline             DOUBLE PRECISION,
    latest_request_id    TEXT    NOT NULL,
    latest_eval_id       TEXT    NOT NULL,
    latest_gate_passed   BOOLEAN NOT NULL,
    latest_passed_minimum BOOLEAN NOT NULL,
    latest_regression    BOOLEAN NOT NULL,
    updated_at           BIGINT    NOT NULL
);

CREATE TABLE gold_tasks (
    gold_id      TEXT  PRIMARY KEY,
    plan_object  TEXT  NOT NULL,
    risk_object  TEXT,
    trace_object TEXT  NOT NULL,
    answer_pass  BOOLEAN NOT NULL,
    min_score    DOUBLE PRECISION  NOT NULL,
    max_score    DOUBLE PRECISION  NOT NULL,
    created_by   TEXT  NOT NULL,
    created_at   BIGINT  NOT NULL
);

-- What was served to whom (GET /evaluations/next).
CREATE TABLE evaluation_items (
    item_id      TEXT    PRIMARY KEY,
    evaluator_id TEXT    NOT NULL,
    target_id    TEXT    NOT NULL,
    gold         BOOLEAN NOT NULL,
    served_at    BIGINT    NOT NULL
);
CREATE UNIQUE INDEX evaluation_items_evaluator_idx ON evaluation_items (evaluator_id, target_id);

-- The service's hash-chained audit log (every transition, policy load, gold task).
CREATE TABLE audit_log (
    id          BIGINT  PRIMARY KEY,
    occurred_at TIMESTAMPTZ NOT NULL,
    actor       TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    target_id   TEXT,
    target_type TEXT,
    detail      JSONB,
    prev_hash   TEXT    NOT NULL,
    hash        TEXT    NOT NULL
);
CREATE TABLE audit_head (
    id        SMALLINT PRIMARY KEY CHECK (id = 1),
    last_id   BIGINT   NOT NULL,
    last_hash TEXT    NOT NULL
);
INSERT INTO audit_head (id, last_id, last_hash) VALUES (1, 0, '');

-- History is append-only: events, objects, approvals, votes and the audit log.
CREATE FUNCTION orchestrator_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER request_events_append_only BEFORE UPDATE OR DELETE ON request_events
FOR EACH ROW EXECUTE FUNCTION orchestrator_append_only();
CREATE TRIGGER objects_append_only BEFORE UPDATE OR DELETE ON objects
FOR EACH ROW EXECUTE FUNCTION orchestrator_append_only();
CREATE TRIGGER approvals_append_only BEFORE UPDATE OR DELETE ON approvals
FOR EACH ROW EXECUTE FUNCTION orchestrator_append_only();
CREATE TRIGGER votes_append_only BEFORE UPDATE OR DELETE ON votes
FOR EACH ROW EXECUTE FUNCTION orchestrator_append_only();
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
FOR EACH ROW EXECUTE FUNCTION orchestrator_append_only();
