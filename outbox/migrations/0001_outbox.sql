-- corral's outbox: the application inserts a row here inside its own
-- transaction; corral publishes each committed row once, in commit order
-- per room, and deletes it (docs/OUTBOX.md).
--
-- Commit order per room: a row's id is drawn by the trigger below after
-- the inserting transaction takes its room's lock (a transaction-scoped
-- advisory lock), so a second writer of the room waits until the first
-- commits or rolls back, and its id is larger. Within a room, id order is
-- commit order and the committed rows are always a prefix: a row is never
-- visible before an earlier row of its room.

CREATE SEQUENCE corral_outbox_id_seq;

CREATE TABLE corral_outbox (
    -- Drawn by corral_outbox_order; any value the application gives is
    -- replaced.
    id              bigint PRIMARY KEY,
    room            text NOT NULL,
    payload         bytea NOT NULL,
    -- Makes a publish retried by corral (after a crash between publishing
    -- and deleting) a duplicate. NULL: 'outbox:' || id.
    idempotency_key text,
    -- Shown to clients as Message.sender; '' by default.
    sender          text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE FUNCTION corral_outbox_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- 1668247154 is 'corr': the room locks' namespace.
    PERFORM pg_advisory_xact_lock(1668247154, hashtext(NEW.room));
    NEW.id := nextval('corral_outbox_id_seq');
    RETURN NEW;
END
$$;

CREATE TRIGGER corral_outbox_order BEFORE INSERT ON corral_outbox
    FOR EACH ROW EXECUTE FUNCTION corral_outbox_order();

-- Wakes the relay at commit (NOTIFY is delivered only if the transaction
-- commits); once per statement, not per row.
CREATE FUNCTION corral_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('corral_outbox', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER corral_outbox_notify AFTER INSERT ON corral_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION corral_outbox_notify();

-- Rows corral can never publish (an invalid room name, a payload over the
-- room's limit): moved here with the reason instead of blocking their
-- room forever.
CREATE TABLE corral_outbox_failed (
    id              bigint PRIMARY KEY,
    room            text NOT NULL,
    payload         bytea NOT NULL,
    idempotency_key text,
    sender          text NOT NULL,
    created_at      timestamptz NOT NULL,
    failed_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    reason          text NOT NULL
);
