//! The alert outbox: delivery bookkeeping for the mailer.
