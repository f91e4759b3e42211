-- Indexes for many jobs due at once (e.g. every renewal of a large site at the same instant).
--
-- Claiming takes the earliest pending jobs in (due_at, id) order, of one site or of all. Over
-- (site_id, due_at) alone, jobs due at the same instant had to be sorted by id, all of them, for
-- every claim; these indexes hold that order (the first replaces jobs_due).
DROP INDEX jobs_due;
CREATE INDEX jobs_pending_site_due ON jobs (site_id, due_at, id) WHERE done_at IS NULL;
CREATE INDEX jobs_pending_due ON jobs (due_at, id) WHERE done_at IS NULL;

-- Rescheduling a subscription drops its other pending jobs (`DELETE … WHERE subject = …`), and
-- every renewal reschedules. The unique key (kind, subject, due_at) cannot serve a lookup by
-- subject alone, so each renewal scanned every pending job.
CREATE INDEX jobs_pending_subject ON jobs (subject) WHERE done_at IS NULL;
