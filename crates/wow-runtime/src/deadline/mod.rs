//! Deadlines (SPEC DM-2): the scheduler that fires due scheduled commands through the gateway.

mod scheduler;

pub use scheduler::{DeadlineScheduler, FirePass, OwnsDeadline, SchedulerConfig, DEADLINE_HEADER};
