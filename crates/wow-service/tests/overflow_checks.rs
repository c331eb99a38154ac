//! SPEC PX-1 at start: a service refuses to start on a crate compiled so that an arithmetic
//! overflow wraps, names it and the fix, and starts with the setting `warn`, listing it in
//! `/health`. The crate that wraps is stood in for by a command enum that implements
//! `CommandBody` by hand and reports such a build (this workspace's own profiles check
//! overflows); `tests/overflow_checks_release.rs` builds a real one outside the workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;
use wow_core::aggregate::{Aggregate, CommandContext};
use wow_core::build::CrateBuild;
use wow_core::command::{BindingError, BodyDecodeError, CommandBody, CommandInfo};
use wow_core::testing_example::{
    Counter, CounterCommand, CounterError, CounterEvent, CounterState,
};
use wow_core::Stores;
use wow_service::{OverflowChecks, Service, ServiceError, Settings};

/// The counter's commands, in a crate that (it says) was built without overflow checks.
#[derive(Debug, Clone)]
struct WrappingCommand(CounterCommand);

impl CommandBody for WrappingCommand {
    const COMMANDS: &'static [CommandInfo] = CounterCommand::COMMANDS;

    fn command_name(&self) -> &'static str {
        self.0.command_name()
    }

    fn validate(&self) -> Result<(), Vec<BindingError>> {
        self.0.validate()
    }

    fn to_body(&self) -> Result<Value, serde_json::Error> {
        self.0.to_body()
    }

    fn from_body(name: &str, body: &Value) -> Result<Self, BodyDecodeError> {
        CounterCommand::from_body(name, body).map(Self)
    }

    fn crate_build() -> Option<CrateBuild> {
        Some(CrateBuild {
            package: "loyalty-domain",
            overflow_checks: Some(false),
            panic_unwinds: true,
        })
    }
}

/// The counter, declared in that crate.
#[derive(Debug)]
struct WrappingCounter;

impl Aggregate for WrappingCounter {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "wrapping_counter";
    type State = CounterState;
    type Command = WrappingCommand;
    type Event = CounterEvent;
    type Error = CounterError;

    fn handle(
        state: &CounterState,
        command: WrappingCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<CounterEvent>, CounterError> {
        Counter::handle(state, command.0, ctx)
    }

    fn apply(state: &mut CounterState, event: &CounterEvent) {
        Counter::apply(state, event);
    }
}

fn with_mode(mode: OverflowChecks) -> Settings {
    Settings {
        overflow_checks: mode,
        ..Settings::default()
    }
}

#[tokio::test]
async fn a_service_whose_domain_crate_wraps_overflows_refuses_to_start_naming_it_and_the_fix() {
    let refused = Service::builder()
        .aggregate::<Counter>()
        .aggregate::<WrappingCounter>()
        .stores(Stores::in_memory())
        .build()
        .await
        .unwrap_err();
    let ServiceError::UncheckedBuild { crates } = &refused else {
        panic!("expected UncheckedBuild, got {refused:?}");
    };
    // Only the crate that wraps: wow-core (the counter's crate) checks its overflows.
    assert_eq!(crates.len(), 1, "{crates:?}");
    assert_eq!(crates[0].build.package, "loyalty-domain");
    assert_eq!(crates[0].aggregates, ["wrapping_counter"]);
    let message = refused.to_string();
    assert!(
        message.starts_with(
            "`loyalty-domain` (aggregate `wrapping_counter`) was compiled without overflow checks"
        ),
        "{message}"
    );
    assert!(
        message.contains("`[profile.release] overflow-checks = true`"),
        "{message}"
    );
    assert!(message.contains("WOW_OVERFLOW_CHECKS=warn"), "{message}");
}

#[tokio::test]
async fn with_overflow_checks_warn_the_service_starts_and_health_lists_the_crate() {
    let service = Service::builder()
        .aggregate::<WrappingCounter>()
        .settings(with_mode(OverflowChecks::Warn))
        .stores(Stores::in_memory())
        .build()
        .await
        .unwrap();
    let response = service
        .router()
        .oneshot(
            Request::builder()
                .uri("/health")
                .header("content-type", "application/json")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let health: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(health["status"], "UP");
    let warnings = health["details"]["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{health}");
    let warning = warnings[0].as_str().unwrap();
    assert!(
        warning.starts_with(
            "`loyalty-domain` (aggregate `wrapping_counter`) was compiled without overflow checks"
        ),
        "{warning}"
    );
    service.stop().await;
}

#[tokio::test]
async fn a_service_of_crates_built_with_overflow_checks_starts_and_health_has_no_warnings() {
    // The derive measured the counter's crate (wow-core), built by the workspace's profile.
    assert_eq!(
        <CounterCommand as CommandBody>::crate_build(),
        Some(CrateBuild {
            package: "wow-core",
            overflow_checks: Some(true),
            panic_unwinds: true,
        })
    );
    let service = Service::builder()
        .aggregate::<Counter>()
        .stores(Stores::in_memory())
        .build()
        .await
        .unwrap();
    let response = service
        .router()
        .oneshot(
            Request::builder()
                .uri("/health")
                .header("content-type", "application/json")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let health: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(health["details"].get("warnings").is_none(), "{health}");
    service.stop().await;
}
