//! Reading the answer of `GET /{aggregate}/{id}/requests/{requestId}` (SPEC TO-1).

use reqwest::StatusCode;
use serde_json::Value;
use wow_core::ErrorCode;

use crate::Lookup;

/// The look-up's answer from its status and body. Only the five documented answers, each
/// with its documented status and fields, count; anything else (a 500, a proxy's page, a
/// body cut short, an answer missing a field) is [`Lookup::Unknown`], never a decision.
pub(crate) fn parse(status: StatusCode, body: &Value) -> Lookup {
    let text = |name: &str| body[name].as_str().map(str::to_owned);
    let unreadable = || Lookup::Unknown(format!("the look-up answered {status}: {body}"));
    match (status, body["status"].as_str()) {
        (StatusCode::OK, Some("APPENDED")) => match (body["version"].as_u64(), text("commandId")) {
            (Some(version), Some(command_id)) => Lookup::Appended {
                version,
                command_id,
                create_time: body["createTime"].as_i64(),
                stream: serde_json::from_value(body["stream"].clone())
                    .ok()
                    .map(Box::new),
            },
            _ => unreadable(),
        },
        (StatusCode::OK, Some("REJECTED")) => {
            let code = serde_json::from_value::<ErrorCode>(body["errorCode"].clone()).ok();
            match (code, text("commandId"), body["version"].as_u64()) {
                (Some(error_code), Some(command_id), Some(version)) => Lookup::Rejected {
                    error_code,
                    error_msg: text("errorMsg").unwrap_or_default(),
                    command_id,
                    version,
                    create_time: body["createTime"].as_i64(),
                },
                _ => unreadable(),
            }
        }
        (StatusCode::ACCEPTED, Some("IN_FLIGHT")) => Lookup::InFlight,
        (StatusCode::NOT_FOUND, Some("NONE")) => Lookup::None,
        _ => unreadable(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_documented_answers_are_decisions() {
        assert_eq!(
            parse(
                StatusCode::OK,
                &json!({"status": "REJECTED", "errorCode": "InsufficientBalance", "errorMsg": "no", "commandId": "c", "version": 2})
            ),
            Lookup::Rejected {
                error_code: ErrorCode::domain("InsufficientBalance"),
                error_msg: "no".to_owned(),
                command_id: "c".to_owned(),
                version: 2,
                create_time: None,
            }
        );
        assert_eq!(
            parse(StatusCode::NOT_FOUND, &json!({"status": "NONE"})),
            Lookup::None
        );
        assert_eq!(
            parse(StatusCode::ACCEPTED, &json!({"status": "IN_FLIGHT"})),
            Lookup::InFlight
        );
        for (status, body) in [
            (StatusCode::NOT_FOUND, json!({"errorCode": "NotFound"})),
            (StatusCode::INTERNAL_SERVER_ERROR, json!({"status": "NONE"})),
            (StatusCode::OK, json!({"status": "APPENDED"})),
            (
                StatusCode::OK,
                json!({"status": "REJECTED", "errorCode": "X"}),
            ),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"status": "UNKNOWN"}),
            ),
            (StatusCode::OK, Value::Null),
        ] {
            assert!(
                matches!(parse(status, &body), Lookup::Unknown(_)),
                "{status} {body}"
            );
        }
    }
}
