-- Traces (OpenTelemetry, cairn_core::trace). `trace` is a run's trace
-- context, decided at submit (JSON: trace_id, parent, sampled); NULL for a
-- run submitted with tracing off. A sampled run has an export cursor: the
-- last event its spans were exported for; `seen` the last event the
-- exporter read (a step still running is read again only once it moved). `done` once the run ended and
-- every event was exported, so the exporter's scan skips it.
ALTER TABLE runs ADD COLUMN trace TEXT;
CREATE TABLE trace_exports (
    run_id        UUID PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    seq           BIGINT NOT NULL DEFAULT 0,
    seen          BIGINT NOT NULL DEFAULT 0,
    root_exported BOOLEAN NOT NULL DEFAULT FALSE,
    done          BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX trace_exports_open ON trace_exports (run_id) WHERE NOT done;
