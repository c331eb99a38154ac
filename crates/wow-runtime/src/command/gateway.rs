//! The CommandGateway: where callers hand in commands and wait for their stages.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use tokio::time::Instant;
use tracing::Instrument;

use crate::command::answer::appended_then_failed;
use crate::command::lost_signals::{
    LostSignals, LOST_SIGNAL_LOOK_UP_AFTER, LOST_SIGNAL_LOOK_UP_EVERY,
};
use crate::command::void_requests::VoidRequests;
use crate::command::{
    InFlightRequests, WaitCoordinator, WaitHandle, WaitPlan, WaitTail, PROTOCOL_HEADER,
    PROTOCOL_VERSION, WAIT_STAGE_HEADER,
};
use crate::idempotency::{
    BloomIdempotencyCheckerProvider, DefaultRequestIdChecker, IdempotencyConfig,
    NoopRequestIdExistenceChecker, RequestIdCheck, RequestIdChecker, RequestIdExistenceChecker,
};
use crate::metrics::PipelineMetrics;
use crate::trace_context;
use wow_core::aggregate::AggregateRegistry;
use wow_core::command::decided_result;
use wow_core::command::{CommandBus, CommandBusError, InTransit, JsonCommand};
use wow_core::command::{
    CommandKind, CommandResult, CommandResultError, CommandStage, WaitFunction,
};
use wow_core::id::{Clock, IdGenerator, SystemClock, UuidV7IdGenerator};
use wow_core::ErrorCode;

/// How long a send may take before acceptance counts as not observed.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// How many void commands a gateway remembers at most, by default (see
/// [`CommandGatewayBuilder::void_record_capacity`]).
pub const DEFAULT_VOID_RECORD_CAPACITY: usize = 32_768;

/// The `result` key that says whether the command reached the bus.
pub const SENT: &str = "sent";

/// The `result` key holding a caller timeout in milliseconds.
pub const TIMEOUT_MS: &str = "timeoutMs";

/// Accepts commands, checks them, sends them on the bus and waits for their stages.
///
/// Order of work (SPEC RQ-9, RQ-10, ST-2, ST-3): validate (a failure consumes nothing), check
/// the request id (reserving it), register the wait, send; a failed send gives the
/// reservation back. Cloning is cheap; clones share everything.
#[derive(Debug, Clone)]
pub struct CommandGateway {
    inner: Arc<Inner>,
}

/// A handle on a [`CommandGateway`] that does not keep it alive: what the consumers behind the
/// node hold, so that ownership runs one way (gateway → bus → node → event bus → dispatcher)
/// and dropping the gateway stops the pipeline.
#[derive(Debug, Clone)]
pub struct WeakCommandGateway {
    inner: std::sync::Weak<Inner>,
}

impl WeakCommandGateway {
    /// The gateway, while something else still holds it.
    pub fn upgrade(&self) -> Option<CommandGateway> {
        self.inner.upgrade().map(|inner| CommandGateway { inner })
    }
}

#[derive(Debug)]
struct Inner {
    registry: AggregateRegistry,
    checker: Arc<dyn RequestIdChecker>,
    bus: Arc<dyn CommandBus>,
    waits: Arc<WaitCoordinator>,
    send_timeout: Duration,
    metrics: Arc<PipelineMetrics>,
    in_flight: Option<Arc<InFlightRequests>>,
    wait_functions: Option<WaitFunctions>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    /// `None` where void resends are never dropped: no history behind the checker, or the
    /// filters are off.
    void_requests: Option<VoidRequests>,
    /// Where a late `PROCESSED` signal's command is looked up; `None` where signals cannot
    /// be lost (one process).
    lost_signals: Option<LostSignals>,
}

/// Builds a [`CommandGateway`].
#[derive(Debug)]
pub struct CommandGatewayBuilder {
    registry: AggregateRegistry,
    bus: Arc<dyn CommandBus>,
    checker: Option<Arc<dyn RequestIdChecker>>,
    waits: Option<Arc<WaitCoordinator>>,
    idempotency: IdempotencyConfig,
    send_timeout: Duration,
    metrics: Arc<PipelineMetrics>,
    in_flight: Option<Arc<InFlightRequests>>,
    wait_functions: Option<WaitFunctions>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    void_record_capacity: usize,
    lost_signals: Option<LostSignals>,
}

impl CommandGatewayBuilder {
    /// Answers a caller waiting for `PROCESSED` from `existence` (the store's request log)
    /// when its signal is late: after 2 s with no `PROCESSED`, and every second after that,
    /// the gateway looks the command up, and a decision made on that very command (appended,
    /// or a recorded rejection) is the answer. For a gateway whose signals cross a network,
    /// where a processor or the NATS server can be lost with a signal in flight. Default:
    /// none (in one process no signal is lost).
    pub fn look_up_lost_signals(mut self, existence: Arc<dyn RequestIdExistenceChecker>) -> Self {
        self.lost_signals = Some(LostSignals::new(existence));
        self
    }

    /// Stamps the results this gateway makes with `clock`'s time. Default: the system clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Names the results this gateway makes with `ids`. Default: UUIDv7.
    pub fn id_generator(mut self, ids: Arc<dyn IdGenerator>) -> Self {
        self.ids = ids;
        self
    }

    /// Replaces the gateway's request-id checker (SPEC RQ-5: only the gateway's). The default
    /// is a [`DefaultRequestIdChecker`] of Bloom filters and
    /// [`NoopRequestIdExistenceChecker`], as on a gateway-only node.
    pub fn request_id_checker(mut self, checker: Arc<dyn RequestIdChecker>) -> Self {
        self.checker = Some(checker);
        self
    }

    /// The `idempotency.*` settings of the default checker's filters, and of the gateway's
    /// record of void commands: a void command's resend is dropped for one `ttl` after its
    /// send, and not at all when `enabled` is off (SPEC RQ-12). Give the settings of a
    /// replaced checker's filters here too. Default: [`IdempotencyConfig::default`].
    pub fn idempotency(mut self, config: IdempotencyConfig) -> Self {
        self.idempotency = config;
        self
    }

    /// How many void commands the gateway remembers at most (SPEC RQ-12): past it, the oldest
    /// is forgotten, and its resend is delivered again (at least once), never a fresh command
    /// dropped. Default [`DEFAULT_VOID_RECORD_CAPACITY`]; 0 drops no resend.
    pub fn void_record_capacity(mut self, capacity: usize) -> Self {
        self.void_record_capacity = capacity;
        self
    }

    /// Shares a wait coordinator (the one the processing nodes signal). Default: a new one.
    pub fn wait_coordinator(mut self, waits: Arc<WaitCoordinator>) -> Self {
        self.waits = Some(waits);
        self
    }

    /// How long a send may take. Default 5 s.
    pub fn send_timeout(mut self, timeout: Duration) -> Self {
        self.send_timeout = timeout;
        self
    }

    /// Counts into `metrics`.
    pub fn metrics(mut self, metrics: Arc<PipelineMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Enters every command's request in `in_flight` before it is sent (SPEC TO-1). Share
    /// it with the processing node behind this gateway, which leaves it once decided; a
    /// gateway without a node in its process must not be given one. Default: none.
    pub fn in_flight(mut self, in_flight: Arc<InFlightRequests>) -> Self {
        self.in_flight = Some(in_flight);
        self
    }

    /// The consumers of each downstream stage, by name: a wait for a consumer that is not
    /// among them is refused before the command is sent (`IllegalArgument`, naming it).
    /// Without them every name is waited for (and a wrong one waits until its timeout).
    pub fn wait_functions(mut self, functions: WaitFunctions) -> Self {
        self.wait_functions = Some(functions);
        self
    }

    /// The gateway.
    pub fn build(self) -> CommandGateway {
        let metrics = self.metrics;
        // Only a checker that asks history says "maybe seen" (the default one does not), and
        // only with its filters on: elsewhere no void resend is dropped, so nothing need be
        // remembered.
        let asks_history = self
            .checker
            .as_ref()
            .is_some_and(|checker| checker.is_authoritative());
        let void_requests = (asks_history && self.idempotency.enabled)
            .then(|| VoidRequests::new(self.idempotency.ttl, self.void_record_capacity));
        let checker = self.checker.unwrap_or_else(|| {
            Arc::new(
                DefaultRequestIdChecker::new(
                    Arc::new(BloomIdempotencyCheckerProvider::new(self.idempotency)),
                    Arc::new(NoopRequestIdExistenceChecker),
                )
                .with_metrics(metrics.clone()),
            )
        });
        CommandGateway {
            inner: Arc::new(Inner {
                registry: self.registry,
                checker,
                bus: self.bus,
                waits: self.waits.unwrap_or_default(),
                send_timeout: self.send_timeout,
                metrics,
                in_flight: self.in_flight,
                wait_functions: self.wait_functions,
                clock: self.clock,
                lost_signals: self.lost_signals,
                ids: self.ids,
                void_requests,
            }),
        }
    }
}

impl CommandGateway {
    /// A handle that does not keep this gateway alive.
    pub fn downgrade(&self) -> WeakCommandGateway {
        WeakCommandGateway {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// A builder for a gateway of `registry`'s aggregates sending on `bus`.
    pub fn builder(registry: AggregateRegistry, bus: Arc<dyn CommandBus>) -> CommandGatewayBuilder {
        CommandGatewayBuilder {
            registry,
            bus,
            checker: None,
            waits: None,
            idempotency: IdempotencyConfig::default(),
            send_timeout: DEFAULT_SEND_TIMEOUT,
            metrics: Arc::new(PipelineMetrics::default()),
            in_flight: None,
            wait_functions: None,
            clock: Arc::new(SystemClock),
            ids: Arc::new(UuidV7IdGenerator),
            void_record_capacity: DEFAULT_VOID_RECORD_CAPACITY,
            lost_signals: None,
        }
    }

    /// The coordinator stage signals must reach for this gateway's callers.
    pub fn wait_coordinator(&self) -> &Arc<WaitCoordinator> {
        &self.inner.waits
    }

    /// The aggregates this gateway accepts commands for.
    pub fn registry(&self) -> &AggregateRegistry {
        &self.inner.registry
    }

    /// Whether `request_id` of `aggregate_id` was sent by this gateway and not yet decided
    /// by the node behind it (always `false` without an in-flight registry).
    pub fn is_in_flight(&self, aggregate_id: &wow_core::AggregateId, request_id: &str) -> bool {
        self.inner
            .in_flight
            .as_ref()
            .is_some_and(|in_flight| in_flight.contains(aggregate_id, request_id))
    }

    /// Whether the bus this gateway sends on holds a message of `request_id` of
    /// `aggregate_id` not yet decided (see [`CommandBus::in_transit`]).
    ///
    /// # Errors
    ///
    /// What the bus answered when it could not be asked.
    pub async fn bus_in_transit(
        &self,
        aggregate_id: &wow_core::AggregateId,
        request_id: &str,
    ) -> Result<InTransit, CommandBusError> {
        self.inner.bus.in_transit(aggregate_id, request_id).await
    }

    /// The counters this gateway updates.
    pub fn metrics(&self) -> &Arc<PipelineMetrics> {
        &self.inner.metrics
    }

    /// Sends `command` and returns once the bus accepted it (stage `SENT`).
    pub async fn send(&self, command: JsonCommand) -> Result<CommandResult, CommandResultError> {
        self.send_and_wait(command, WaitPlan::sent()).await
    }

    /// Sends `command` and waits for the stage `plan` names.
    ///
    /// Returns the final result when it succeeded. Otherwise the error holds the complete
    /// result: a pre-send failure (stage `SENT`, `result.sent` false), a send failure, a
    /// failed stage, or [`CommandResultError::Timeout`] when the wait expired.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future releases the wait (SPEC ST-6); a command already sent goes on.
    pub async fn send_and_wait(
        &self,
        command: JsonCommand,
        plan: WaitPlan,
    ) -> Result<CommandResult, CommandResultError> {
        let deadline = Instant::now() + plan.timeout;
        let (mut handle, sent) = match self.start(command, plan).await {
            Ok(started) => started,
            Err(failure) => return Err(self.finish_failed(failure)),
        };
        // The gateway's own SENT is taken as the first result, with no copy held for `next`.
        handle.take_local(&sent);
        if handle.is_finished() {
            self.inner.metrics.record_result(&sent);
            return Ok(sent);
        }
        let mut last = sent;
        // The command's own PROCESSED, for a later stage's failure to say it was appended.
        let mut processed: Option<CommandResult> = None;
        // A wait for PROCESSED alone may be answered from the store when its signal is late.
        let lost_signals = self.inner.lost_signals.as_ref().filter(|_| {
            handle.plan().stage == CommandStage::Processed && handle.plan().tail.is_none()
        });
        let mut look_up_at = lost_signals.map(|_| Instant::now() + LOST_SIGNAL_LOOK_UP_AFTER);
        loop {
            let wake = look_up_at.map_or(deadline, |at| at.min(deadline));
            let result = match tokio::time::timeout_at(wake, handle.next()).await {
                Ok(Some(result)) if handle.is_finished() => result,
                Ok(Some(result)) => {
                    if result.stage == CommandStage::Processed && result.function.is_none() {
                        processed = Some(result.clone());
                    }
                    last = result;
                    continue;
                }
                Ok(None) => return Err(self.timeout(&handle, last)),
                Err(_) if Instant::now() >= deadline => return Err(self.timeout(&handle, last)),
                Err(_) => {
                    let found = match lost_signals {
                        Some(lost) => {
                            lost.decided(&last, self.inner.clock.as_ref(), self.inner.ids.as_ref())
                                .await
                        }
                        None => None,
                    };
                    match found {
                        Some(result) => result,
                        None => {
                            look_up_at = Some(Instant::now() + LOST_SIGNAL_LOOK_UP_EVERY);
                            continue;
                        }
                    }
                }
            };
            self.inner.metrics.record_result(&result);
            if result.succeeded {
                return Ok(result);
            }
            let mut result = result;
            if let Some(processed) = &processed {
                appended_then_failed(&mut result, processed);
            }
            return Err(CommandResultError::Failed(Box::new(result)));
        }
    }

    /// Sends `command` and yields one result per stage signal up to the stage `plan` names,
    /// in stage order (SPEC RS-2). A failure is an ordinary element: read each `succeeded`.
    /// A pre-send or send failure is the only element; an expired wait ends the stream with
    /// a `RequestTimeout` element.
    pub fn send_and_wait_stream(
        &self,
        command: JsonCommand,
        plan: WaitPlan,
    ) -> impl Stream<Item = CommandResult> + Send + 'static {
        let gateway = self.clone();
        enum State {
            Start(JsonCommand, WaitPlan),
            Waiting(WaitHandle, Instant, Box<CommandResult>),
            Done,
        }
        futures::stream::unfold(State::Start(command, plan), move |state| {
            let gateway = gateway.clone();
            async move {
                let (mut handle, deadline, last) = match state {
                    State::Done => return None,
                    State::Start(command, plan) => {
                        let deadline = Instant::now() + plan.timeout;
                        match gateway.start(command, plan).await {
                            Ok((mut handle, sent)) => {
                                handle.push(sent.clone());
                                (handle, deadline, sent)
                            }
                            Err(failure) => {
                                gateway.inner.metrics.record_result(&failure);
                                return Some((failure, State::Done));
                            }
                        }
                    }
                    State::Waiting(handle, deadline, last) => (handle, deadline, *last),
                };
                match tokio::time::timeout_at(deadline, handle.next()).await {
                    Ok(Some(result)) if handle.is_finished() => {
                        gateway.inner.metrics.record_result(&result);
                        Some((result, State::Done))
                    }
                    Ok(Some(result)) => {
                        let next = State::Waiting(handle, deadline, Box::new(result.clone()));
                        Some((result, next))
                    }
                    Ok(None) | Err(_) => {
                        let timeout = gateway.timeout(&handle, last);
                        Some((timeout.result().clone(), State::Done))
                    }
                }
            }
        })
    }

    fn finish_failed(&self, failure: CommandResult) -> CommandResultError {
        self.inner.metrics.record_result(&failure);
        CommandResultError::Failed(Box::new(failure))
    }

    /// The timeout error: the last result observed (stage reached, ids) turned into a
    /// `RequestTimeout` that carries the expired timeout.
    fn timeout(&self, handle: &WaitHandle, last: CommandResult) -> CommandResultError {
        let timeout = handle.plan().timeout;
        let mut result = last;
        result.function = None;
        result.id = self.inner.ids.next_id();
        result.error_code = ErrorCode::RequestTimeout;
        let awaited = match &handle.plan().tail {
            Some(tail) => format!(
                "chained wait: no {} signal of the command and {} of every command its saga sent",
                handle.plan().stage,
                tail.stage
            ),
            None => format!("no {} signal", handle.plan().stage),
        };
        result.error_msg = format!(
            "{awaited} within {} ms; the outcome is unknown: look it up by request id",
            timeout.as_millis()
        );
        result.succeeded = false;
        result.signal_time = self.inner.clock.now_millis();
        result.result.insert(
            TIMEOUT_MS.to_owned(),
            u64::try_from(timeout.as_millis())
                .unwrap_or(u64::MAX)
                .into(),
        );
        self.inner.metrics.record_result(&result);
        CommandResultError::Timeout {
            result: Box::new(result),
            timeout,
        }
    }

    /// Validates, checks, registers and sends: the registered handle, and the `SENT` result,
    /// the last stage reached so far, for the caller to take (`WaitHandle::take_local`) or to
    /// hand to the handle (`WaitHandle::push`) before reading any signal.
    async fn start(
        &self,
        mut command: JsonCommand,
        plan: WaitPlan,
    ) -> Result<(WaitHandle, CommandResult), CommandResult> {
        // SPEC OB-1: the send runs in the gateway's span, a child of the context the command
        // carries; the command carries the gateway's context on to the node.
        let span = trace_context::gateway_span(&command);
        trace_context::stamp(&span, &mut command.header);
        self.start_sending(command, plan).instrument(span).await
    }

    /// [`start`](Self::start) within the gateway's span.
    async fn start_sending(
        &self,
        command: JsonCommand,
        mut plan: WaitPlan,
    ) -> Result<(WaitHandle, CommandResult), CommandResult> {
        if !plan.stage.has_consumer_signals() {
            // Only downstream stages have per-consumer signals; Wow ignores the names then.
            plan.function = None;
        }
        if let Some(tail) = &mut plan.tail {
            if !tail.stage.has_consumer_signals() {
                tail.function = None;
            }
        }
        let command = self
            .prepare(command, &plan)
            .map_err(|failure| self.stamp(*failure))?;
        self.check_request_id(&command)
            .await
            .map_err(|failure| self.stamp(*failure))?;
        if let Some(in_flight) = &self.inner.in_flight {
            in_flight.enter(&command.aggregate_id, &command.request_id);
        }
        let handle = self.inner.waits.register(&command.id, plan);
        let sent = self
            .stamp(CommandResult::success(&command, CommandStage::Sent).with_result(SENT, true));
        if let Some((failure, unsure)) = self.send_on_bus(&command).await {
            self.send_failed(&command, unsure);
            return Err(self.stamp(failure));
        }
        Ok((handle, sent))
    }

    /// `result` with this gateway's time and a fresh id of its own.
    fn stamp(&self, result: CommandResult) -> CommandResult {
        result.stamped(self.inner.clock.as_ref(), self.inner.ids.as_ref())
    }

    /// The command decoded and stamped for the bus (its kind, the stage it is awaited to, the
    /// wire protocol), or why it is not sent: an unknown aggregate or command, a binding
    /// error, a void command awaited past `SENT`.
    fn prepare(
        &self,
        mut command: JsonCommand,
        plan: &WaitPlan,
    ) -> Result<JsonCommand, Box<CommandResult>> {
        let runtime = self
            .inner
            .registry
            .find(&command.aggregate_id.aggregate_name)
            .map_err(|unknown| {
                Box::new(not_sent(
                    &command,
                    unknown.error_code(),
                    unknown.to_string(),
                ))
            })?;
        // A former name (an old client's route) is sent under today's: the store keys,
        // request ids and partitions are today's name's.
        self.inner
            .registry
            .use_todays_name(&mut command.aggregate_id);
        if let (Some(function), Some(known)) = (&plan.function, &self.inner.wait_functions) {
            if !known.has(plan.stage, function, &command.aggregate_id.context_name) {
                return Err(Box::new(not_sent(
                    &command,
                    ErrorCode::IllegalArgument,
                    format!(
                        "no consumer matches {function} at stage {}: {}",
                        plan.stage,
                        known.describe(plan.stage)
                    ),
                )));
            }
        }
        if let Some(tail) = &plan.tail {
            self.check_tail(&command, plan, tail)?;
        }
        let decoded = runtime
            .decode_command(&command.name, &command.body)
            .map_err(|error| {
                Box::new(
                    not_sent(&command, error.error_code(), error.to_string())
                        .with_binding_errors(error.binding_errors()),
                )
            })?;
        if decoded.kind() == CommandKind::Void && plan.stage > CommandStage::Sent {
            return Err(Box::new(not_sent(
                &command,
                ErrorCode::IllegalArgument,
                format!(
                    "`{}` is a void command: only the SENT stage can be awaited",
                    command.name
                ),
            )));
        }
        command.kind = decoded.kind();
        command
            .header
            .insert(WAIT_STAGE_HEADER.to_owned(), plan.stage.as_str().to_owned());
        command
            .header
            .insert(PROTOCOL_HEADER.to_owned(), PROTOCOL_VERSION.to_string());
        if let Some(tail) = &plan.tail {
            tail.write(&mut command.header);
        }
        Ok(command)
    }

    /// A chained wait is for `SAGA_HANDLED` only, and its tail names a consumer that exists.
    fn check_tail(
        &self,
        command: &JsonCommand,
        plan: &WaitPlan,
        tail: &WaitTail,
    ) -> Result<(), Box<CommandResult>> {
        if plan.stage != CommandStage::SagaHandled {
            return Err(Box::new(not_sent(
                command,
                ErrorCode::IllegalArgument,
                format!(
                    "a chained wait (a tail stage) waits for SAGA_HANDLED first, not {}",
                    plan.stage
                ),
            )));
        }
        if let (Some(function), Some(known)) = (&tail.function, &self.inner.wait_functions) {
            if tail.stage.has_consumer_signals()
                && !known.has(tail.stage, function, &command.aggregate_id.context_name)
            {
                return Err(Box::new(not_sent(
                    command,
                    ErrorCode::IllegalArgument,
                    format!(
                        "no consumer matches the tail {function} at stage {}: {}",
                        tail.stage,
                        known.describe(tail.stage)
                    ),
                )));
            }
        }
        Ok(())
    }

    /// The gateway's request-id check (SPEC RQ-1): the recorded decision when history holds
    /// one; a void command's exact resend within its window.
    async fn check_request_id(&self, command: &JsonCommand) -> Result<(), Box<CommandResult>> {
        let (aggregate_id, request_id) = (&command.aggregate_id, &command.request_id);
        match self.inner.checker.check(aggregate_id, request_id).await {
            RequestIdCheck::Decided(decision) => {
                let fingerprint = command.json_fingerprint();
                Err(Box::new(
                    decided_result(command, CommandStage::Sent, &fingerprint, &decision)
                        .with_result(SENT, false),
                ))
            }
            check if command.kind == CommandKind::Void => {
                self.check_void(command, check == RequestIdCheck::MaybeSeen)
            }
            RequestIdCheck::MaybeSeen | RequestIdCheck::Fresh => Ok(()),
        }
    }

    /// A void command leaves nothing in history (SPEC RQ-12): it is dropped as a resend only
    /// when the filter may have seen it and the gateway's exact record holds the same
    /// (aggregate, request id) sent within the window (SPEC ID-3). A filter hit alone, a
    /// forgotten entry, a gateway with no record: it goes out (at least once).
    fn check_void(
        &self,
        command: &JsonCommand,
        maybe_seen: bool,
    ) -> Result<(), Box<CommandResult>> {
        let Some(record) = &self.inner.void_requests else {
            return Ok(());
        };
        let now = self.inner.clock.now_millis();
        if record.admit(&command.aggregate_id, &command.request_id, now, maybe_seen) {
            return Ok(());
        }
        Err(Box::new(not_sent(
            command,
            ErrorCode::DuplicateRequestId,
            format!(
                "void command `{}` with request id `{}` was sent to {} before, within the last {} ms",
                command.name,
                command.request_id,
                command.aggregate_id,
                record.window().as_millis()
            ),
        )))
    }

    /// Hands `command` to the bus within the send timeout: `None` when the bus took it, else
    /// the failure and whether the command may have been delivered all the same (the
    /// transport failed, the send timed out).
    async fn send_on_bus(&self, command: &JsonCommand) -> Option<(CommandResult, bool)> {
        let sent = tokio::time::timeout(
            self.inner.send_timeout,
            self.inner.bus.send(command.clone()),
        );
        match sent.await {
            Ok(Ok(())) => None,
            Ok(Err(error)) => {
                let unsure = matches!(error, CommandBusError::Unavailable(_));
                Some((
                    not_sent(command, error.error_code(), error.to_string()),
                    unsure,
                ))
            }
            Err(_) => Some((
                not_sent(
                    command,
                    ErrorCode::ServiceUnavailable,
                    format!(
                        "the bus did not accept the command within {} ms",
                        self.inner.send_timeout.as_millis()
                    ),
                ),
                true,
            )),
        }
    }

    /// After a failed send: the request id is released; a failure that may have delivered
    /// keeps the request in flight until the node decides or the registry's horizon passes,
    /// one that surely did not (the bus is closed, nobody subscribes) ends it.
    fn send_failed(&self, command: &JsonCommand, unsure: bool) {
        let (aggregate_id, request_id) = (&command.aggregate_id, &command.request_id);
        self.inner.checker.release(aggregate_id, request_id);
        if let (CommandKind::Void, Some(record)) = (command.kind, &self.inner.void_requests) {
            record.forget(aggregate_id, request_id);
        }
        if let Some(in_flight) = &self.inner.in_flight {
            if unsure {
                in_flight.unsure(aggregate_id, request_id);
            } else {
                in_flight.leave(aggregate_id, request_id);
            }
        }
    }
}

/// A failure at `SENT`: the command was not handed to the bus.
fn not_sent(command: &JsonCommand, code: ErrorCode, message: String) -> CommandResult {
    CommandResult::failure(command, CommandStage::Sent, code, message).with_result(SENT, false)
}

/// The consumers of each downstream stage, by name (see
/// [`CommandGatewayBuilder::wait_functions`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitFunctions {
    by_stage: std::collections::BTreeMap<CommandStage, std::collections::BTreeSet<String>>,
}

impl WaitFunctions {
    /// None yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the consumer `name` of `stage`.
    pub fn with(mut self, stage: CommandStage, name: impl Into<String>) -> Self {
        self.by_stage.entry(stage).or_default().insert(name.into());
        self
    }

    /// Whether a consumer of `stage` matches `function` for a command of `context` (each
    /// consumer handles with `onEvent`, and signals in the context of the stream's aggregate).
    pub fn has(&self, stage: CommandStage, function: &WaitFunction, context: &str) -> bool {
        if !function.context.is_empty() && function.context != context {
            return false;
        }
        self.by_stage.get(&stage).is_some_and(|names| {
            names.iter().any(|name| {
                (function.processor.is_empty() || function.processor == *name)
                    && (function.name.is_empty() || function.name == "onEvent")
            })
        })
    }

    /// The consumers of `stage`, for a person.
    pub fn describe(&self, stage: CommandStage) -> String {
        match self.by_stage.get(&stage) {
            Some(names) if !names.is_empty() => format!(
                "its consumers are {}",
                names
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => "it has no consumers".to_owned(),
        }
    }
}
