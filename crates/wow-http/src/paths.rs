//! Path parameters that are not text: a segment that is not UTF-8 once percent-decoded
//! (`/account/%FF/state`), or that holds NUL (`/unique-key/sku/%00`, which PostgreSQL cannot
//! hold in text and SQLite can: one answer on every store), is answered before any route runs,
//! as the API answers bad input, not by axum's `Path` rejection (a `text/plain` 400 without a
//! code).

use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{RawPathParams, Request};
use axum::middleware::Next;
use axum::response::Response;

use crate::error::ApiError;

/// The layer over every route (and under every prefix): a request whose path parameters do not
/// decode to UTF-8, or hold NUL, is 400 `IllegalArgument` with `{errorCode, errorMsg}` and `Wow-Error-Code`,
/// and reaches no route, so nothing is recorded. Every other request passes unchanged.
pub(crate) async fn utf8_params(
    params: Result<RawPathParams, RawPathParamsRejection>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    match params {
        Err(RawPathParamsRejection::InvalidUtf8InPathParam(invalid)) => {
            return Err(ApiError::illegal_argument(format!(
                "{}: a path segment must be UTF-8 once percent-decoded",
                invalid.body_text()
            )));
        }
        Ok(params) => {
            if let Some((name, _)) = params.iter().find(|(_, value)| value.contains('\0')) {
                return Err(ApiError::illegal_argument(format!(
                    "`{name}`: a path segment must not hold NUL (%00)"
                )));
            }
        }
        Err(_) => {}
    }
    Ok(next.run(request).await)
}

/// `router` with [`utf8_params`] over each of its routes and its fallbacks.
pub(crate) fn checked(router: axum::Router) -> axum::Router {
    router.layer(axum::middleware::from_fn(utf8_params))
}
