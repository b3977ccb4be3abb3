CREATE FUNCTION public.oncely_add_partitions(parent regclass, first_at timestamp with time zone, last_at timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    day date := (first_at AT TIME ZONE 'UTC')::date;
    last_day date := (last_at AT TIME ZONE 'UTC')::date;
    partition text;
    added integer := 0;
BEGIN
    WHILE day <= last_day LOOP
        partition := 'oncely_occurrences_p' || to_char(day, 'YYYYMMDD');
        IF to_regclass(partition) IS NULL THEN
            -- Two sessions adding the same day take turns here, and the second finds it made:
            -- taking a lock on a table also brings this session's view of the tables up to date
            -- (an advisory lock does not, and the second failed on "already exists").
            EXECUTE format('LOCK TABLE %s IN SHARE UPDATE EXCLUSIVE MODE', parent);
            IF to_regclass(partition) IS NULL THEN
                -- Made apart, then attached: CREATE TABLE ... PARTITION OF takes ACCESS
                -- EXCLUSIVE on the parent and waits behind every open transaction on it;
                -- ATTACH takes SHARE UPDATE EXCLUSIVE, which no claim or booking conflicts with.
                EXECUTE format(
                    'CREATE TABLE %I (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                    partition, parent
                );
                EXECUTE format(
                    'ALTER TABLE %s ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                    parent, partition,
                    day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC'
                );
                added := added + 1;
            END IF;
        END IF;
        day := day + 1;
    END LOOP;
    RETURN added;
END $$;

CREATE TABLE public.oncely_actions (
    id bigint NOT NULL,
    at timestamp with time zone NOT NULL,
    tenant text DEFAULT ''::text NOT NULL,
    key text NOT NULL,
    action text NOT NULL,
    actor text NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    detail text
);

ALTER TABLE public.oncely_actions ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.oncely_actions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.oncely_attempts (
    occurrence_id bigint NOT NULL,
    attempt integer NOT NULL,
    outcome text NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    worker text,
    fence bigint,
    error text,
    scheduled_for timestamp with time zone,
    CONSTRAINT oncely_attempts_outcome_check CHECK ((outcome = ANY (ARRAY['failed'::text, 'lost'::text])))
);

CREATE TABLE public.oncely_code_versions (
    fingerprint text NOT NULL,
    first_seen_at timestamp with time zone NOT NULL,
    last_seen_at timestamp with time zone NOT NULL,
    applied_at timestamp with time zone
);

CREATE SEQUENCE public.oncely_fences
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

CREATE TABLE public.oncely_horizons (
    name text NOT NULL,
    before timestamp with time zone NOT NULL
);

CREATE SEQUENCE public.oncely_lease_tokens
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

CREATE TABLE public.oncely_leases (
    name text NOT NULL,
    owner text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    token bigint NOT NULL
);

CREATE TABLE public.oncely_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone NOT NULL
);

CREATE TABLE public.oncely_occurrences (
    id bigint NOT NULL,
    schedule_id bigint NOT NULL,
    tenant text DEFAULT ''::text NOT NULL,
    scheduled_for timestamp with time zone NOT NULL,
    local_wall text,
    fold smallint DEFAULT 0 NOT NULL,
    dst_note text,
    ordinal integer,
    origin text DEFAULT 'schedule'::text NOT NULL,
    status text NOT NULL,
    reason text,
    attempts integer DEFAULT 0 NOT NULL,
    run_after timestamp with time zone NOT NULL,
    lease_owner text,
    lease_expires_at timestamp with time zone,
    fence bigint,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    worker text,
    error text,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT oncely_occurrences_origin_check CHECK ((origin = ANY (ARRAY['schedule'::text, 'trigger'::text, 'backfill'::text, 'defer'::text]))),
    CONSTRAINT oncely_occurrences_running_has_lease CHECK (((status <> 'running'::text) OR ((lease_expires_at IS NOT NULL) AND (fence IS NOT NULL)))),
    CONSTRAINT oncely_occurrences_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'running'::text, 'succeeded'::text, 'retrying'::text, 'failed'::text, 'skipped'::text, 'abandoned'::text, 'invalid'::text])))
)
PARTITION BY RANGE (scheduled_for);

ALTER TABLE public.oncely_occurrences ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.oncely_occurrences_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.oncely_schedules (
    id bigint NOT NULL,
    tenant text DEFAULT ''::text NOT NULL,
    key text NOT NULL,
    job text NOT NULL,
    origin text NOT NULL,
    trigger_kind text NOT NULL,
    trigger_spec jsonb NOT NULL,
    payload jsonb DEFAULT 'null'::jsonb NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    status_reason text,
    next_run_at timestamp with time zone,
    consecutive_failures integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    keyless boolean DEFAULT false NOT NULL,
    paused_until timestamp with time zone,
    CONSTRAINT oncely_schedules_origin_check CHECK ((origin = ANY (ARRAY['code'::text, 'api'::text]))),
    CONSTRAINT oncely_schedules_status_check CHECK ((status = ANY (ARRAY['active'::text, 'ended'::text, 'invalid'::text, 'removed'::text]))),
    CONSTRAINT oncely_schedules_trigger_kind_check CHECK ((trigger_kind = ANY (ARRAY['cron'::text, 'every'::text, 'rrule'::text, 'at'::text])))
);

ALTER TABLE public.oncely_schedules ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.oncely_schedules_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.oncely_sweeps (
    id bigint NOT NULL,
    worker text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone NOT NULL,
    pruned integer NOT NULL,
    reclaimed integer NOT NULL,
    abandoned integer NOT NULL,
    error text
);

ALTER TABLE public.oncely_sweeps ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.oncely_sweeps_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.oncely_workers (
    name text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    heartbeat_at timestamp with time zone NOT NULL,
    oncely_version text NOT NULL,
    code_version text NOT NULL
);

ALTER TABLE ONLY public.oncely_actions
    ADD CONSTRAINT oncely_actions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.oncely_attempts
    ADD CONSTRAINT oncely_attempts_pkey PRIMARY KEY (occurrence_id, attempt);

ALTER TABLE ONLY public.oncely_code_versions
    ADD CONSTRAINT oncely_code_versions_pkey PRIMARY KEY (fingerprint);

ALTER TABLE ONLY public.oncely_horizons
    ADD CONSTRAINT oncely_horizons_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.oncely_leases
    ADD CONSTRAINT oncely_leases_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.oncely_migrations
    ADD CONSTRAINT oncely_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.oncely_occurrences
    ADD CONSTRAINT oncely_occurrences_pkey PRIMARY KEY (id, scheduled_for);

ALTER TABLE ONLY public.oncely_occurrences
    ADD CONSTRAINT oncely_occurrences_schedule_id_scheduled_for_key UNIQUE (schedule_id, scheduled_for);

ALTER TABLE ONLY public.oncely_schedules
    ADD CONSTRAINT oncely_schedules_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.oncely_schedules
    ADD CONSTRAINT oncely_schedules_tenant_key_key UNIQUE (tenant, key);

ALTER TABLE ONLY public.oncely_sweeps
    ADD CONSTRAINT oncely_sweeps_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.oncely_workers
    ADD CONSTRAINT oncely_workers_pkey PRIMARY KEY (name);

CREATE INDEX oncely_actions_at ON public.oncely_actions USING btree (tenant, at, id);

CREATE INDEX oncely_actions_schedule ON public.oncely_actions USING btree (tenant, key, at, id);

CREATE INDEX oncely_attempts_scheduled ON public.oncely_attempts USING btree (scheduled_for);

CREATE INDEX oncely_occurrences_claimable ON ONLY public.oncely_occurrences USING btree (run_after, id) WHERE (status = ANY (ARRAY['pending'::text, 'retrying'::text]));

CREATE INDEX oncely_occurrences_history ON ONLY public.oncely_occurrences USING btree (tenant, scheduled_for);

CREATE INDEX oncely_occurrences_in_progress ON ONLY public.oncely_occurrences USING btree (schedule_id) WHERE (status = ANY (ARRAY['pending'::text, 'running'::text, 'retrying'::text]));

CREATE INDEX oncely_occurrences_leased ON ONLY public.oncely_occurrences USING btree (lease_expires_at) WHERE (status = 'running'::text);

CREATE INDEX oncely_schedules_due ON public.oncely_schedules USING btree (next_run_at) WHERE ((status = 'active'::text) AND (NOT paused) AND (next_run_at IS NOT NULL));

CREATE INDEX oncely_schedules_keyless_done ON public.oncely_schedules USING btree (updated_at) WHERE (keyless AND (status = ANY (ARRAY['ended'::text, 'removed'::text])));

CREATE INDEX oncely_schedules_pause_ends ON public.oncely_schedules USING btree (paused_until) WHERE (paused_until IS NOT NULL);

CREATE INDEX oncely_schedules_stopped ON public.oncely_schedules USING btree (job) WHERE (paused OR (status = 'invalid'::text));

CREATE INDEX oncely_sweeps_finished ON public.oncely_sweeps USING btree (finished_at, id);

CREATE INDEX oncely_workers_heartbeat ON public.oncely_workers USING btree (heartbeat_at);
