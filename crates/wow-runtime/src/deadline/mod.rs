//! Deadlines (SPEC DM-2, DM-6): the scheduler that fires due scheduled commands through the
//! gateway.

mod scheduler;

pub(crate) use scheduler::is_decided;

pub use scheduler::{
    fired_command, DeadlinePartitions, DeadlineScheduler, FirePass, SchedulerConfig,
    DEADLINE_HEADER, DEADLINE_OWNER_HEADER, DEADLINE_SCHEDULER,
};
