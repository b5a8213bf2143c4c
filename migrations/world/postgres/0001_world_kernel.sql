-- The world kernel (seed 003): content-addressed components, worlds and their hash-chained
-- turns, attempts with their source invocations and LLM calls, one event per accepted
-- WorldPatch, and the service's own hash-chained audit log.
--
-- Ids of runtime records (attempts, source invocations, LLM calls, events) are UUIDs kept as
-- their canonical text, so the same statements run on SQLite and Postgres. Components keep
-- their JCS text (`content`): the bytes their hash is SHA-256 of, exactly. Human ids and
-- entity ids follow the kernel's one grammar, checked before any write.

CREATE TABLE IF NOT EXISTS audit_log (
    id          BIGINT      PRIMARY KEY,
    occurred_at TIMESTAMPTZ NOT NULL,
    actor       TEXT        NOT NULL,
    action      TEXT        NOT NULL,
    target_id   TEXT,
    target_type TEXT,
    detail      JSONB,
    prev_hash   TEXT        NOT NULL,
    hash        TEXT        NOT NULL UNIQUE
);

CREATE TABLE IF NOT EXISTS audit_head (
    id        SMALLINT PRIMARY KEY CHECK (id = 1),
    last_id   BIGINT   NOT NULL,
    last_hash TEXT     NOT NULL
);
INSERT INTO audit_head (id, last_id, last_hash) VALUES (1, 0, '') ON CONFLICT (id) DO NOTHING;

CREATE OR REPLACE FUNCTION world_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER audit_log_no_update_delete BEFORE UPDATE OR DELETE ON audit_log
FOR EACH ROW EXECUTE FUNCTION world_append_only();

-- Components: immutable, keyed by the SHA-256 of their JCS bytes.
CREATE TABLE json_schemas (
    hash         TEXT        PRIMARY KEY CHECK (length(hash) = 64),
    content      TEXT        NOT NULL,
    -- Set on the schemas that ship with the kernel ('world-patch').
    builtin_name TEXT        UNIQUE,
    created_at   TIMESTAMPTZ NOT NULL
);

CREATE TABLE response_sources (
    hash       TEXT        PRIMARY KEY CHECK (length(hash) = 64),
    content    TEXT        NOT NULL,
    label      TEXT        NOT NULL,
    -- interface.name: llm_chat_completions, http_json, …
    kind       TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE cognition_workflows (
    hash       TEXT        PRIMARY KEY CHECK (length(hash) = 64),
    content    TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

-- An executable profile references a workflow, and nothing else.
CREATE TABLE cognition_profiles (
    hash          TEXT        PRIMARY KEY CHECK (length(hash) = 64),
    workflow_hash TEXT        NOT NULL REFERENCES cognition_workflows (hash),
    content       TEXT        NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL
);

CREATE TABLE scenarios (
    hash       TEXT        PRIMARY KEY CHECK (length(hash) = 64),
    label      TEXT        NOT NULL,
    content    TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
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
    turn          BIGINT,
    created_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX scenario_lineage_scenario_idx ON scenario_lineage (scenario_hash);

CREATE TRIGGER json_schemas_immutable BEFORE UPDATE OR DELETE ON json_schemas
FOR EACH ROW EXECUTE FUNCTION world_append_only();
CREATE TRIGGER response_sources_immutable BEFORE UPDATE OR DELETE ON response_sources
FOR EACH ROW EXECUTE FUNCTION world_append_only();
CREATE TRIGGER cognition_workflows_immutable BEFORE UPDATE OR DELETE ON cognition_workflows
FOR EACH ROW EXECUTE FUNCTION world_append_only();
CREATE TRIGGER cognition_profiles_immutable BEFORE UPDATE OR DELETE ON cognition_profiles
FOR EACH ROW EXECUTE FUNCTION world_append_only();
CREATE TRIGGER scenarios_immutable BEFORE UPDATE OR DELETE ON scenarios
FOR EACH ROW EXECUTE FUNCTION world_append_only();

-- A world: its committed head, and the lease that gives one attempt at a time (across
-- replicas) the right to commit its next turn.
CREATE TABLE worlds (
    slug             TEXT        PRIMARY KEY,
    scenario_hash    TEXT        NOT NULL REFERENCES scenarios (hash),
    current_turn     BIGINT      NOT NULL CHECK (current_turn >= 0),
    head_hash        TEXT        NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    lease_attempt_id TEXT,
    lease_owner      TEXT,
    lease_expires_at TIMESTAMPTZ
);

-- Committed turns: each record is content-addressed (turn_hash = SHA-256 of `record`, its
-- JCS text) and names its predecessor's hash.
CREATE TABLE turns (
    world_slug         TEXT        NOT NULL REFERENCES worlds (slug),
    turn               BIGINT      NOT NULL CHECK (turn >= 0),
    turn_hash          TEXT        NOT NULL,
    previous_turn_hash TEXT,
    simulation_time    TEXT        NOT NULL,
    attempt_id         TEXT,
    record             TEXT        NOT NULL,
    committed_at       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (world_slug, turn)
);
CREATE TRIGGER turns_immutable BEFORE UPDATE OR DELETE ON turns
FOR EACH ROW EXECUTE FUNCTION world_append_only();

-- The ledger canonical object anchoring a turn's hash (world.anchor = true).
CREATE TABLE turn_anchors (
    world_slug  TEXT        NOT NULL,
    turn        BIGINT      NOT NULL,
    anchor_id   TEXT        NOT NULL,
    anchored_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (world_slug, turn),
    FOREIGN KEY (world_slug, turn) REFERENCES turns (world_slug, turn)
);

CREATE TABLE attempts (
    attempt_id                TEXT        PRIMARY KEY,
    world_slug                TEXT        NOT NULL REFERENCES worlds (slug),
    attempted_turn            BIGINT      NOT NULL CHECK (attempted_turn >= 1),
    status                    TEXT        NOT NULL
        CHECK (status IN ('running', 'committed', 'failed', 'interrupted')),
    -- The process that held the lease (for logs).
    lease_owner               TEXT        NOT NULL,
    failure_class             TEXT,
    failure_message           TEXT,
    started_at                TIMESTAMPTZ NOT NULL,
    ended_at                  TIMESTAMPTZ,
    duration_ms               BIGINT      CHECK (duration_ms IS NULL OR duration_ms >= 0),
    committed_turn_hash       TEXT,
    source_invocation_count   BIGINT      NOT NULL DEFAULT 0 CHECK (source_invocation_count >= 0),
    last_source_invocation_id TEXT,
    source_trace_summary      JSONB       NOT NULL DEFAULT '{}'::jsonb,
    UNIQUE (world_slug, attempt_id)
);
CREATE INDEX attempts_world_idx ON attempts (world_slug, started_at DESC);
CREATE INDEX attempts_running_idx ON attempts (world_slug) WHERE status = 'running';

CREATE TABLE source_invocations (
    source_invocation_id        TEXT        PRIMARY KEY,
    attempt_id                  TEXT        NOT NULL,
    world_slug                  TEXT        NOT NULL,
    attempted_turn              BIGINT      NOT NULL CHECK (attempted_turn >= 1),
    invocation_seq              BIGINT      NOT NULL CHECK (invocation_seq >= 1),
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
    logical_generation_attempt  BIGINT 
        CHECK (logical_generation_attempt IS NULL OR logical_generation_attempt >= 1),
    tool_loop_round             BIGINT      CHECK (tool_loop_round IS NULL OR tool_loop_round >= 0),
    model_output_kind           TEXT,
    status                      TEXT        NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'succeeded', 'failed', 'interrupted')),
    failure_class               TEXT,
    failure_message             TEXT,
    started_at                  TIMESTAMPTZ NOT NULL,
    ended_at                    TIMESTAMPTZ,
    duration_ms                 BIGINT      CHECK (duration_ms IS NULL OR duration_ms >= 0),
    request_json                JSONB       NOT NULL,
    response_json               JSONB,
    response_text               TEXT,
    response_headers            JSONB       NOT NULL DEFAULT '{}'::jsonb,
    http_status                 BIGINT ,
    validation_status           TEXT,
    metadata                    JSONB       NOT NULL DEFAULT '{}'::jsonb,
    UNIQUE (attempt_id, invocation_seq),
    CONSTRAINT source_invocations_attempt_fk
        FOREIGN KEY (world_slug, attempt_id) REFERENCES attempts (world_slug, attempt_id)
);
CREATE INDEX source_invocations_world_time_idx ON source_invocations (world_slug, started_at DESC);
CREATE INDEX source_invocations_workflow_idx ON source_invocations (workflow_hash);
CREATE INDEX source_invocations_source_idx ON source_invocations (source_hash);
CREATE INDEX source_invocations_kind_idx ON source_invocations (invocation_kind);
CREATE INDEX source_invocations_parent_idx ON source_invocations (parent_source_invocation_id);
CREATE INDEX source_invocations_llm_call_idx ON source_invocations (llm_call_id);
CREATE INDEX source_invocations_subject_idx ON source_invocations (world_slug, workflow_subject_entity_id);
CREATE INDEX source_invocations_running_idx ON source_invocations (attempt_id) WHERE status = 'running';

ALTER TABLE attempts
    ADD CONSTRAINT attempts_last_source_invocation_fk
    FOREIGN KEY (last_source_invocation_id) REFERENCES source_invocations (source_invocation_id)
    DEFERRABLE INITIALLY DEFERRED;

-- The rich LLM trace, one row per generation, linked to its source invocation. Provenance is
-- the workflow node, never a phase.
CREATE TABLE llm_calls (
    llm_call_id                TEXT        PRIMARY KEY,
    source_invocation_id       TEXT        NOT NULL UNIQUE
        REFERENCES source_invocations (source_invocation_id),
    attempt_id                 TEXT        NOT NULL REFERENCES attempts (attempt_id),
    world_slug                 TEXT        NOT NULL,
    attempted_turn             BIGINT      NOT NULL,
    workflow_hash              TEXT        NOT NULL REFERENCES cognition_workflows (hash),
    workflow_node_id           TEXT        NOT NULL,
    workflow_subject_entity_id TEXT        NOT NULL,
    logical_generation_attempt BIGINT      NOT NULL CHECK (logical_generation_attempt >= 1),
    tool_loop_round            BIGINT      NOT NULL CHECK (tool_loop_round >= 0),
    model_output_kind          TEXT,
    requested_model            TEXT        NOT NULL,
    model                      TEXT        NOT NULL,
    schema_delivery            TEXT        NOT NULL,
    stream                     BOOLEAN     NOT NULL,
    request_messages           JSONB       NOT NULL,
    response_format            JSONB,
    status                     TEXT        NOT NULL
        CHECK (status IN ('running', 'succeeded', 'failed', 'interrupted')),
    started_at                 TIMESTAMPTZ NOT NULL,
    ended_at                   TIMESTAMPTZ,
    duration_ms                BIGINT,
    http_status                BIGINT ,
    raw_text                   TEXT,
    normalized_text            TEXT,
    prompt_tokens              BIGINT,
    completion_tokens          BIGINT,
    total_tokens               BIGINT,
    parse_errors               JSONB       NOT NULL DEFAULT '[]'::jsonb,
    validation_errors          JSONB       NOT NULL DEFAULT '[]'::jsonb,
    artifacts                  JSONB       NOT NULL DEFAULT '[]'::jsonb,
    failure_class              TEXT,
    failure_message            TEXT
);
CREATE INDEX llm_calls_attempt_idx ON llm_calls (attempt_id, started_at);
CREATE INDEX llm_calls_world_idx ON llm_calls (world_slug, started_at DESC);

ALTER TABLE source_invocations
    ADD CONSTRAINT source_invocations_llm_call_fk
    FOREIGN KEY (llm_call_id) REFERENCES llm_calls (llm_call_id)
    DEFERRABLE INITIALLY DEFERRED;

-- Streamed chunks, written while the generation runs.
CREATE TABLE llm_call_chunks (
    llm_call_id TEXT        NOT NULL REFERENCES llm_calls (llm_call_id),
    seq         BIGINT      NOT NULL CHECK (seq >= 0),
    received_at TIMESTAMPTZ NOT NULL,
    text        TEXT        NOT NULL,
    PRIMARY KEY (llm_call_id, seq)
);

-- One event per accepted WorldPatch of a committed turn, with the generation that produced
-- it; written in the turn's commit.
CREATE TABLE world_events (
    event_id                TEXT        PRIMARY KEY,
    world_slug              TEXT        NOT NULL,
    turn                    BIGINT      NOT NULL CHECK (turn >= 1),
    patch_seq               BIGINT      NOT NULL CHECK (patch_seq >= 1),
    attempt_id              TEXT        NOT NULL REFERENCES attempts (attempt_id),
    subject_entity_id       TEXT        NOT NULL,
    source_invocation_id    TEXT        REFERENCES source_invocations (source_invocation_id),
    llm_call_id             TEXT        REFERENCES llm_calls (llm_call_id),
    cognition_workflow_hash TEXT        REFERENCES cognition_workflows (hash),
    response_source_hash    TEXT        REFERENCES response_sources (hash),
    workflow_node_id        TEXT,
    narration               TEXT        NOT NULL,
    patch                   JSONB       NOT NULL,
    effects                 JSONB       NOT NULL,
    occurred_at             TIMESTAMPTZ NOT NULL,
    UNIQUE (world_slug, turn, patch_seq),
    FOREIGN KEY (world_slug, turn) REFERENCES turns (world_slug, turn)
);

-- What each event touched: one row per entity or environment, before and after the patch.
CREATE TABLE world_event_touches (
    event_id          TEXT   NOT NULL REFERENCES world_events (event_id),
    world_slug        TEXT   NOT NULL,
    turn              BIGINT NOT NULL,
    patch_seq         BIGINT  NOT NULL,
    entity_id         TEXT,
    environment_label TEXT,
    before_value      JSONB  NOT NULL,
    after_value       JSONB  NOT NULL,
    CHECK ((entity_id IS NULL) <> (environment_label IS NULL))
);
CREATE INDEX world_event_touches_event_idx ON world_event_touches (event_id);
CREATE INDEX world_event_touches_entity_idx ON world_event_touches (world_slug, entity_id, turn, patch_seq);

CREATE TRIGGER world_events_immutable BEFORE UPDATE OR DELETE ON world_events
FOR EACH ROW EXECUTE FUNCTION world_append_only();
CREATE TRIGGER world_event_touches_immutable BEFORE UPDATE OR DELETE ON world_event_touches
FOR EACH ROW EXECUTE FUNCTION world_append_only();
