//! Commands: the message, its kind and stages, results, and the bus that carries them to
//! a processing node. The gateway, waiting and the node itself are `wow-runtime`'s.
pub use wow_contracts::command::{
    CommandBus, CommandBusError, CommandHandler, InMemoryCommandBus, InTransit, JsonCommand,
};
pub use wow_model::command::{
    decided_result, duplicate_result, headers, request_fingerprint, BindingError, BodyDecodeError,
    CommandBody, CommandInfo, CommandKind, CommandMessage, CommandResult, CommandResultError,
    CommandStage, EventBody, FunctionInfo, FunctionKind, UnknownStage, WaitFunction,
    ORIGINAL_COMMAND_ID, OWNER_ID_HEADER, REJECTION_DETAIL, REPLAYED, SPACE_ID_HEADER,
    TRACEPARENT_HEADER, TRACESTATE_HEADER,
};
