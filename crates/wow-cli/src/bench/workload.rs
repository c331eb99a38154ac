//! What each request of a phase is: its path, body and headers, precomputed per account so
//! that a request costs only its request id (and, for `open`, its path).

use bytes::Bytes;
use hyper::http::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::http::{HeaderValue, Request, Uri};
use wow_core::CommandStage;

use super::client::{Body, Target};
use super::error::BenchError;

/// The opening balance of every account: transfers and deposits never run out or overflow.
const OPENING_BALANCE: i64 = 1_000_000_000_000;

/// The command the load sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Operation {
    /// `POST /account/{id}/open`: a new account per request.
    Open,
    /// `POST /account/{id}/deposit` of 1.
    Deposit,
    /// `POST /account/{id}/transfer` of 1 to the next account (the saga completes it).
    Transfer,
}

impl Operation {
    /// The command's name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Deposit => "deposit",
            Self::Transfer => "transfer",
        }
    }
}

/// The account named `i` in run `prefix`.
pub(crate) fn account(prefix: &str, i: u64) -> String {
    format!("bench-{prefix}-{i}")
}

/// The requests of one phase: ticket `t` goes to account `t % aggregates` (for `open`, to
/// account `t` itself).
#[derive(Debug)]
pub(crate) struct Workload {
    operation: Operation,
    /// The run's random prefix, in request ids.
    prefix: String,
    /// The prefix of the account names: the run's, or one given to reuse accounts.
    accounts: String,
    /// What tells this phase's request ids from another's.
    phase: char,
    /// The paths per account (empty for `open`, which makes each).
    paths: Vec<Uri>,
    /// One body for all, or one per account (`transfer`).
    bodies: Vec<Bytes>,
    stage: HeaderValue,
    host: HeaderValue,
    auth: Option<HeaderValue>,
}

impl Workload {
    /// The requests of `operation` on `aggregates` accounts named after `accounts`, under
    /// request ids of run `prefix`; `phase` keeps the request ids of the setup and the
    /// measured run apart.
    pub(crate) fn new(
        operation: Operation,
        stage: CommandStage,
        aggregates: u64,
        (prefix, accounts): (&str, &str),
        phase: char,
        target: &Target,
    ) -> Result<Self, BenchError> {
        let ids = 0..aggregates;
        let paths = match operation {
            Operation::Open => Vec::new(),
            _ => ids
                .clone()
                .map(|i| path(accounts, i, operation))
                .collect::<Result<_, _>>()?,
        };
        let bodies = match operation {
            Operation::Open => vec![open_body()],
            Operation::Deposit => vec![Bytes::from_static(br#"{"amount":1}"#)],
            Operation::Transfer => ids
                .map(|i| transfer_body(&account(accounts, (i + 1) % aggregates)))
                .collect(),
        };
        Ok(Self {
            operation,
            prefix: prefix.to_owned(),
            accounts: accounts.to_owned(),
            phase,
            paths,
            bodies,
            stage: HeaderValue::from_static(stage.as_str()),
            host: target.host.clone(),
            auth: target.auth.clone(),
        })
    }

    /// The request of ticket `ticket`, under a request id of its own.
    pub(crate) fn request(&self, ticket: u64) -> Result<Request<Body>, BenchError> {
        let (uri, body) = match self.operation {
            Operation::Open => (path(&self.accounts, ticket, Operation::Open)?, 0),
            _ => {
                let at = index(ticket, self.paths.len());
                (self.paths[at].clone(), index(ticket, self.bodies.len()))
            }
        };
        let request_id = format!("{}-{}{ticket}", self.prefix, self.phase);
        let mut builder = Request::post(uri)
            .header(HOST, self.host.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header("command-wait-stage", self.stage.clone())
            .header(
                "command-request-id",
                HeaderValue::try_from(request_id).map_err(hyper::http::Error::from)?,
            );
        if let Some(auth) = &self.auth {
            builder = builder.header(AUTHORIZATION, auth.clone());
        }
        Ok(builder.body(Body::new(self.bodies[body].clone()))?)
    }
}

/// `ticket` folded onto `len` slots (`len` is above zero).
fn index(ticket: u64, len: usize) -> usize {
    // `len` fits in u64, and the remainder is below `len`, so both casts are lossless.
    (ticket % len.max(1) as u64) as usize
}

/// `/account/{account}/{command}`.
fn path(prefix: &str, i: u64, operation: Operation) -> Result<Uri, BenchError> {
    let path = format!("/account/{}/{}", account(prefix, i), operation.as_str());
    Ok(Uri::try_from(path).map_err(hyper::http::Error::from)?)
}

/// `open`'s body: a named holder and a large balance.
fn open_body() -> Bytes {
    Bytes::from(format!(r#"{{"name":"bench","balance":{OPENING_BALANCE}}}"#))
}

/// `transfer`'s body: 1 to `to`.
fn transfer_body(to: &str) -> Bytes {
    Bytes::from(format!(r#"{{"to":"{to}","amount":1}}"#))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target::parse("http://127.0.0.1:1", None).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn transfers_go_round_the_ring() {
        let load = Workload::new(
            Operation::Transfer,
            CommandStage::Processed,
            3,
            ("r1", "p"),
            'r',
            &target(),
        );
        let load = load.unwrap_or_else(|e| panic!("{e}"));
        let request = load.request(5).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(request.uri().path(), "/account/bench-p-2/transfer");
        assert_eq!(load.bodies[2].as_ref(), br#"{"to":"bench-p-0","amount":1}"#);
        assert_eq!(request.headers()["command-request-id"], "r1-r5");
        assert_eq!(request.headers()["command-wait-stage"], "PROCESSED");
    }

    #[test]
    fn each_open_names_a_new_account() {
        let load = Workload::new(
            Operation::Open,
            CommandStage::Sent,
            10,
            ("p", "p"),
            's',
            &target(),
        );
        let load = load.unwrap_or_else(|e| panic!("{e}"));
        let request = load.request(42).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(request.uri().path(), "/account/bench-p-42/open");
    }
}
