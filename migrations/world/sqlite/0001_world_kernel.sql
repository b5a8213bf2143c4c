-- The world kernel (seed 003): content-addressed components, worlds and their hash-chained
-- turns, attempts with their source invocations and LLM calls, one event per accepted
-- WorldPatch, and the service's own hash-chained audit log.
--
-- Ids of runtime records (attempts, source invocations, LLM calls, events) are UUIDs kept as
-- their canonical text, so the same statements run on SQLite and Postgres. Components keep
-- their JCS text (`content`): the bytes their hash is SHA-256 of, exactly. Human ids and
-- entity ids follow the kernel's one grammar, checked before any write.

CREATE TABLE IF NOT EXISTS audit_log (
    id          INTEGER      PRIMARY KEY,
    occurred_at TEXT NOT NULL,
    actor       TEXT        NOT NULL,
    action      TEXT        NOT NULL,
    target_id   TEXT,
    target_type TEXT,
    detail      TEXT,
    prev_hash   TEXT        NOT NULL,
    hash        TEXT        NOT NULL UNIQUE
);

CREATE TABLE IF NOT EXISTS audit_head (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    last_id   INTEGER   NOT NULL,
    last_hash TEXT     NOT NULL
);
INSERT INTO audit_head (id, last_id, last_hash) VALUES (1, 0, '') ON CONFLICT (id) DO NOTHING;

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;

-- Components: immutable, keyed by the SHA-256 of their JCS bytes.
CREATE TABLE json_schemas (
    hash         TEXT        PRIMARY KEY CHECK (length(hash) = 64),
    content      TEXT        NOT NULL,
    -- Set on the schemas that ship with the kernel ('world-patch').
    builtin_name TEXT        UNIQUE,
    created_at   TEXT NOT NULL
);

CREATE TABLE response_sources (
    hash       TEXT        PRIMARY KEY CHECK (length(hash) = 64),
    content    TEXT        NOT NULL,
    label      TEXT        NOT NULL,
    -- interface.name: llm_chat_completions, http_json, …
    kind       TEXT        NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE cognition_workflows (
    hash       TEXT        PRIMARY KEY CHECK (length(hash) = 64),
    content    TEXT        NOT NULL,
    created_at TEXT NOT NULL
);

-- An executable profile references a workflow, and nothing else.
CREATE TABLE cognition_profiles (
    hash          TEXT        PRIMARY KEY CHECK (length(hash) = 64),
    workflow_hash TEXT        NOT NULL REFERENCES cognition_workflows (hash),
    content       TEXT        NOT NULL,
    created_at    TEXT NOT NULL
);

CREATE TABLE scenarios (
    hash       TEXT        PRIMARY KEY CHECK (length(hash) = 64),
    label      TEXT        NOT NULL,
    content    TEXT        NOT NULL,
    created_at TEXT NOT NULL
);

-- Which component references which (for `/…/hash/{hash}/uses`), written with the referrer.
CREATE TABLE component_uses (
    used_kind TEXT NOT NULL,
    used_hash TEXT NOT NULL,
    user_kind TEXT NOT NULL,
    user_hash TEXT NOT NULL,
    pointer   TEXT NOT NULL,
    PRIMARY KEY (used_kind, used_hash, user_kind, user_hash, pointer)
);

-- Where a forked scenario came from.
CREATE TABLE scenario_lineage (
    lineage_id    TEXT        PRIMARY KEY,
    scenario_hash TEXT        NOT NULL REFERENCES scenarios (hash),
    parent_hash   TEXT        NOT NULL REFERENCES scenarios (hash),
    world_slug    TEXT,
    turn          INTEGER,
    created_at    TEXT NOT NULL
);
CREATE INDEX scenario_lineage_scenario_idx ON scenario_lineage (scenario_hash);

CREATE TRIGGER json_schemas_immutable_update BEFORE UPDATE ON json_schemas
BEGIN SELECT RAISE(ABORT, 'json_schemas is append-only'); END;
CREATE TRIGGER json_schemas_immutable_delete BEFORE DELETE ON json_schemas
BEGIN SELECT RAISE(ABORT, 'json_schemas is append-only'); END;
CREATE TRIGGER response_sources_immutable_update BEFORE UPDATE ON response_sources
BEGIN SELECT RAISE(ABORT, 'response_sources is append-only'); END;
CREATE TRIGGER response_sources_immutable_delete BEFORE DELETE ON response_sources
BEGIN SELECT RAISE(ABORT, 'response_sources is append-only'); END;
CREATE TRIGGER cognition_workflows_immutable_update BEFORE UPDATE ON cognition_workflows
BEGIN SELECT RAISE(ABORT, 'cognition_workflows is append-only'); END;
CREATE TRIGGER cognition_workflows_immutable_delete BEFORE DELETE ON cognition_workflows
BEGIN SELECT RAISE(ABORT, 'cognition_workflows is append-only'); END;
CREATE TRIGGER cognition_profiles_immutable_update BEFORE UPDATE ON cognition_profiles
BEGIN SELECT RAISE(ABORT, 'cognition_profiles is append-only'); END;
CREATE TRIGGER cognition_profiles_immutable_delete BEFORE DELETE ON cognition_profiles
BEGIN SELECT RAISE(ABORT, 'cognition_profiles is append-only'); END;
CREATE TRIGGER scenarios_immutable_update BEFORE UPDATE ON scenarios
BEGIN SELECT RAISE(ABORT, 'scenarios is append-only'); END;
CREATE TRIGGER scenarios_immutable_delete BEFORE DELETE ON scenarios
BEGIN SELECT RAISE(ABORT, 'scenarios is append-only'); END;

-- A world: its committed head, and the lease that gives one attempt at a time (across
-- replicas) the right to commit its next turn.
CREATE TABLE worlds (
    slug             TEXT        PRIMARY KEY,
    scenario_hash    TEXT        NOT NULL REFERENCES scenarios (hash),
    current_turn     INTEGER      NOT NULL CHECK (current_turn >= 0),
    head_hash        TEXT        NOT NULL,
    created_at       TEXT NOT NULL,
    lease_attempt_id TEXT,
    lease_owner      TEXT,
    lease_expires_at TEXT
);

-- Committed turns: each record is content-addressed (turn_hash = SHA-256 of `record`, its
-- JCS text) and names its predecessor's hash.
CREATE TABLE turns (
    world_slug         TEXT        NOT NULL REFERENCES worlds (slug),
    turn               INTEGER      NOT NULL CHECK (turn >= 0),
    turn_hash          TEXT        NOT NULL,
    previous_turn_hash TEXT,
    simulation_time    TEXT        NOT NULL,
    attempt_id         TEXT,
    record             TEXT        NOT NULL,
    committed_at       TEXT NOT NULL,
    PRIMARY KEY (world_slug, turn)
);
CREATE TRIGGER turns_immutable_update BEFORE UPDATE ON turns
BEGIN SELECT RAISE(ABORT, 'turns is append-only'); END;
CREATE TRIGGER turns_immutable_delete BEFORE DELETE ON turns
BEGIN SELECT RAISE(ABORT, 'turns is append-only'); END;

-- The ledger canonical object anchoring a turn's hash (world.anchor = true).
CREATE TABLE turn_anchors (
    world_slug  TEXT        NOT NULL,
    turn        INTEGER      NOT NULL,
    anchor_id   TEXT        NOT NULL,
    anchored_at TEXT NOT NULL,
    PRIMARY KEY (world_slug, turn),
    FOREIGN KEY (world_slug, turn) REFERENCES turns (world_slug, turn)
);

CREATE TABLE attempts (
    attempt_id                TEXT        PRIMARY KEY,
    world_slug                TEXT        NOT NULL REFERENCES worlds (slug),
    attempted_turn            INTEGER      NOT NULL CHECK (attempted_turn >= 1),
    status                    TEXT        NOT NULL
        CHECK (status IN ('running', 'committed', 'failed', 'interrupted')),
    -- The process that held the lease (for logs).
    lease_owner               TEXT        NOT NULL,
    failure_class             TEXT,
    failure_message           TEXT,
    started_at                TEXT NOT NULL,
    ended_at                  TEXT,
    duration_ms               INTEGER      CHECK (duration_ms IS NULL OR duration_ms >= 0),
    committed_turn_hash       TEXT,
    source_invocation_count   INTEGER     NOT NULL DEFAULT 0 CHECK (source_invocation_count >= 0),
    last_source_invocation_id TEXT,
    source_trace_summary      TEXT       NOT NULL DEFAULT '{}',
    UNIQUE (world_slug, attempt_id),
    FOREIGN KEY (last_source_invocation_id) REFERENCES source_invocations (source_invocation_id)
        DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX attempts_world_idx ON attempts (world_slug, started_at);
CREATE INDEX attempts_running_idx ON attempts (world_slug) WHERE status = 'running';

CREATE TABLE source_invocations (
    source_invocation_id        TEXT        PRIMARY KEY,
    attempt_id                  TEXT        NOT NULL,
    world_slug                  TEXT        NOT NULL,
    attempted_turn              INTEGER      NOT NULL CHECK (attempted_turn >= 1),
    invocation_seq              INTEGER     NOT NULL CHECK (invocation_seq >= 1),
    workflow_hash               TEXT        REFERENCES cognition_workflows (hash),
    workflow_node_id            TEXT,
    workflow_subject_entity_id  TEXT,
    source_hash                 TEXT        NOT NULL REFERENCES response_sources (hash),
    invocation_kind             TEXT        NOT NULL
        CHECK (invocation_kind IN ('llm_generation', 'ambient_context', 'model_elected_tool')),
    ambient_source_id           TEXT,
    tool_name                   TEXT,
    parent_source_invocation_id TEXT        REFERENCES source_invocations (source_invocation_id),
    input_schema_hash           TEXT        REFERENCES json_schemas (hash),
    output_schema_hash          TEXT        REFERENCES json_schemas (hash),
    llm_call_id                 TEXT,
    logical_generation_attempt  INTEGER
        CHECK (logical_generation_attempt IS NULL OR logical_generation_attempt >= 1),
    tool_loop_round             INTEGER     CHECK (tool_loop_round IS NULL OR tool_loop_round >= 0),
    model_output_kind           TEXT,
    status                      TEXT        NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'succeeded', 'failed', 'interrupted')),
    failure_class               TEXT,
    failure_message             TEXT,
    started_at                  TEXT NOT NULL,
    ended_at                    TEXT,
    duration_ms                 INTEGER      CHECK (duration_ms IS NULL OR duration_ms >= 0),
    request_json                TEXT       NOT NULL,
    response_json               TEXT,
    response_text               TEXT,
    response_headers            TEXT       NOT NULL DEFAULT '{}',
    http_status                 INTEGER,
    validation_status           TEXT,
    metadata                    TEXT       NOT NULL DEFAULT '{}',
    UNIQUE (attempt_id, invocation_seq),
    CONSTRAINT source_invocations_attempt_fk
        FOREIGN KEY (world_slug, attempt_id) REFERENCES attempts (world_slug, attempt_id),
    CONSTRAINT source_invocations_llm_call_fk
        FOREIGN KEY (llm_call_id) REFERENCES llm_calls (llm_call_id) DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX source_invocations_world_time_idx ON source_invocations (world_slug, started_at);
CREATE INDEX source_invocations_workflow_idx ON source_invocations (workflow_hash);
CREATE INDEX source_invocations_source_idx ON source_invocations (source_hash);
CREATE INDEX source_invocations_kind_idx ON source_invocations (invocation_kind);
CREATE INDEX source_invocations_parent_idx ON source_invocations (parent_source_invocation_id);
CREATE INDEX source_invocations_llm_call_idx ON source_invocations (llm_call_id);
CREATE INDEX source_invocations_subject_idx ON source_invocations (world_slug, workflow_subject_entity_id);
CREATE INDEX source_invocations_running_idx ON source_invocations (attempt_id) WHERE status = 'running';

-- The rich LLM trace, one row per generation, linked to its source invocation. Provenance is
-- the workflow node, never a phase.
CREATE TABLE llm_calls (
    llm_call_id                TEXT        PRIMARY KEY,
    source_invocation_id       TEXT        NOT NULL UNIQUE
        REFERENCES source_invocations (source_invocation_id),
    attempt_id                 TEXT        NOT NULL REFERENCES attempts (attempt_id),
    world_slug                 TEXT        NOT NULL,
    attempted_turn             INTEGER      NOT NULL,
    workflow_hash              TEXT        NOT NULL REFERENCES cognition_workflows (hash),
    workflow_node_id           TEXT        NOT NULL,
    workflow_subject_entity_id TEXT        NOT NULL,
    logical_generation_attempt INTEGER     NOT NULL CHECK (logical_generation_attempt >= 1),
    tool_loop_round            INTEGER     NOT NULL CHECK (tool_loop_round >= 0),
    model_output_kind          TEXT,
    requested_model            TEXT        NOT NULL,
    model                      TEXT        NOT NULL,
    schema_delivery            TEXT        NOT NULL,
    stream                     INTEGER     NOT NULL,
    request_messages           TEXT       NOT NULL,
    response_format            TEXT,
    status                     TEXT        NOT NULL
        CHECK (status IN ('running', 'succeeded', 'failed', 'interrupted')),
    started_at                 TEXT NOT NULL,
    ended_at                   TEXT,
    duration_ms                INTEGER,
    http_status                INTEGER,
    raw_text                   TEXT,
    normalized_text            TEXT,
    prompt_tokens              INTEGER,
    completion_tokens          INTEGER,
    total_tokens               INTEGER,
    parse_errors               TEXT       NOT NULL DEFAULT '[]',
    validation_errors          TEXT       NOT NULL DEFAULT '[]',
    artifacts                  TEXT       NOT NULL DEFAULT '[]',
    failure_class              TEXT,
    failure_message            TEXT
);
CREATE INDEX llm_calls_attempt_idx ON llm_calls (attempt_id, started_at);
CREATE INDEX llm_calls_world_idx ON llm_calls (world_slug, started_at);

-- Streamed chunks, written while the generation runs.
CREATE TABLE llm_call_chunks (
    llm_call_id TEXT        NOT NULL REFERENCES llm_calls (llm_call_id),
    seq         INTEGER     NOT NULL CHECK (seq >= 0),
    received_at TEXT NOT NULL,
    text        TEXT        NOT NULL,
    PRIMARY KEY (llm_call_id, seq)
);

-- One event per accepted WorldPatch of a committed turn, with the generation that produced
-- it; written in the turn's commit.
CREATE TABLE world_events (
    event_id                TEXT        PRIMARY KEY,
    world_slug              TEXT        NOT NULL,
    turn                    INTEGER      NOT NULL CHECK (turn >= 1),
    patch_seq               INTEGER     NOT NULL CHECK (patch_seq >= 1),
    attempt_id              TEXT        NOT NULL REFERENCES attempts (attempt_id),
    subject_entity_id       TEXT        NOT NULL,
    source_invocation_id    TEXT        REFERENCES source_invocations (source_invocation_id),
    llm_call_id             TEXT        REFERENCES llm_calls (llm_call_id),
    cognition_workflow_hash TEXT        REFERENCES cognition_workflows (hash),
    response_source_hash    TEXT        REFERENCES response_sources (hash),
    workflow_node_id        TEXT,
    narration               TEXT        NOT NULL,
    patch                   TEXT       NOT NULL,
    effects                 TEXT       NOT NULL,
    occurred_at             TEXT NOT NULL,
    UNIQUE (world_slug, turn, patch_seq),
    FOREIGN KEY (world_slug, turn) REFERENCES turns (world_slug, turn)
);

-- What each event touched: one row per entity or environment, before and after the patch.
CREATE TABLE world_event_touches (
    event_id          TEXT   NOT NULL REFERENCES world_events (event_id),
    world_slug        TEXT   NOT NULL,
    turn              INTEGER NOT NULL,
    patch_seq         INTEGER NOT NULL,
    entity_id         TEXT,
    environment_label TEXT,
    before_value      TEXT  NOT NULL,
    after_value       TEXT  NOT NULL,
    CHECK ((entity_id IS NULL) <> (environment_label IS NULL))
);
CREATE INDEX world_event_touches_event_idx ON world_event_touches (event_id);
CREATE INDEX world_event_touches_entity_idx ON world_event_touches (world_slug, entity_id, turn, patch_seq);

CREATE TRIGGER world_events_immutable_update BEFORE UPDATE ON world_events
BEGIN SELECT RAISE(ABORT, 'world_events is append-only'); END;
CREATE TRIGGER world_events_immutable_delete BEFORE DELETE ON world_events
BEGIN SELECT RAISE(ABORT, 'world_events is append-only'); END;
CREATE TRIGGER world_event_touches_immutable_update BEFORE UPDATE ON world_event_touches
BEGIN SELECT RAISE(ABORT, 'world_event_touches is append-only'); END;
CREATE TRIGGER world_event_touches_immutable_delete BEFORE DELETE ON world_event_touches
BEGIN SELECT RAISE(ABORT, 'world_event_touches is append-only'); END;
