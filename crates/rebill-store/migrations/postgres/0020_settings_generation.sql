-- What every service process may keep in memory of sites and keys (the authenticated key with
-- its site) is valid for one generation: every write of a site or a key adds one to it in its
-- own database transaction, and each process reads it a few times a second and forgets what it
-- kept when it moved on.
CREATE TABLE settings_generation (
    id BIGINT PRIMARY KEY,
    generation BIGINT NOT NULL
);
INSERT INTO settings_generation (id, generation) VALUES (1, 0);

-- The running service processes: the generation each has seen and when it last said so
-- (milliseconds of real time). A write of a site or a key returns once every process heard from
-- in the last two seconds has seen its generation.
CREATE TABLE service_nodes (
    node_id TEXT PRIMARY KEY,
    seen_generation BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL
);
