//! The syntax of the ids a request names, each checked by the one type that holds it: an
//! aggregate, owner or space id ([`Id`]), a tenant id ([`TenantId`]) and a request id
//! ([`RequestId`]). The rules are wow-core's ([`wow_core::check_aggregate_id`],
//! [`wow_core::check_request_id`]); `/openapi.json` states them as schema bounds.

use wow_core::{DEFAULT_TENANT_ID, MAX_AGGREGATE_ID_BYTES};

/// An aggregate, owner or space id: 1 to 128 bytes of `A-Z a-z 0-9 . _ : -`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Id(String);

/// Why a text is not an [`Id`]: the rule it breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{rule}")]
pub(crate) struct InvalidId {
    /// The rule, as wow-core words it.
    rule: &'static str,
    /// Whether the text is refused for its characters and holds a control character.
    control: bool,
}

impl Id {
    /// `text` as an id, or the rule it breaks.
    pub(crate) fn parse(text: &str) -> Result<Self, InvalidId> {
        wow_core::check_aggregate_id(text).map_err(|rule| InvalidId {
            rule,
            control: text.len() <= MAX_AGGREGATE_ID_BYTES
                && !text.is_empty()
                && text.chars().any(char::is_control),
        })?;
        Ok(Self(text.to_owned()))
    }

    /// The id as text.
    pub(crate) fn into_string(self) -> String {
        self.0
    }
}

impl InvalidId {
    /// The rule, as wow-core words it: a control character is one of the characters an id
    /// may not hold ("may hold only A-Z a-z 0-9 . _ : -").
    pub(crate) fn rule(self) -> &'static str {
        self.rule
    }

    /// The rule as a command's binding error words it: a control character is named as such
    /// ("must not contain control characters").
    pub(crate) fn for_binding(self) -> &'static str {
        if self.control {
            "must not contain control characters"
        } else {
            self.rule
        }
    }
}

/// A tenant id: an [`Id`], or the default tenant's own name `(0)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TenantId(String);

impl TenantId {
    /// `text` as a tenant id, or the rule it breaks (as wow-core words it).
    pub(crate) fn parse(text: &str) -> Result<Self, &'static str> {
        if text != DEFAULT_TENANT_ID {
            Id::parse(text).map_err(InvalidId::rule)?;
        }
        Ok(Self(text.to_owned()))
    }

    /// The id as text.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as text.
    pub(crate) fn into_string(self) -> String {
        self.0
    }
}

/// A request id (`Command-Request-Id`): 1 to 128 bytes without control characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestId(String);

impl RequestId {
    /// `text` as the request id of a command, or the rule it breaks.
    pub(crate) fn parse(text: &str) -> Result<Self, &'static str> {
        if text.is_empty() || text.len() > MAX_AGGREGATE_ID_BYTES {
            return Err("must be 1 to 128 bytes");
        }
        if text.chars().any(char::is_control) {
            return Err("must not contain control characters");
        }
        Ok(Self(text.to_owned()))
    }

    /// `text` as a request id that can have been recorded: one a command can carry in a
    /// header (visible ASCII and spaces, not only spaces), or the rule it breaks.
    pub(crate) fn recorded(text: &str) -> Result<Self, &'static str> {
        wow_core::check_request_id(text)?;
        Ok(Self(text.to_owned()))
    }

    /// The id as text.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as text.
    pub(crate) fn into_string(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_by_the_rules_of_an_aggregate_id() {
        assert!(Id::parse("acc-1.a_b:c").is_ok());
        let rule = |text: &str| Id::parse(text).map(|_| ()).map_err(InvalidId::rule);
        assert_eq!(rule(""), Err("must be 1 to 128 bytes"));
        assert_eq!(rule(&"a".repeat(129)), Err("must be 1 to 128 bytes"));
        assert_eq!(rule("a b"), Err("may hold only A-Z a-z 0-9 . _ : -"));
        assert_eq!(rule("a/b"), Err("may hold only A-Z a-z 0-9 . _ : -"));
        assert_eq!(rule("tab\there"), Err("may hold only A-Z a-z 0-9 . _ : -"));
        let binding = |text: &str| Id::parse(text).map(|_| ()).map_err(InvalidId::for_binding);
        assert_eq!(
            binding("tab\there"),
            Err("must not contain control characters")
        );
        assert_eq!(binding("a b"), Err("may hold only A-Z a-z 0-9 . _ : -"));
        assert_eq!(
            binding(&format!("\t{}", "a".repeat(128))),
            Err("must be 1 to 128 bytes")
        );
    }

    #[test]
    fn tenant_and_request_ids_have_their_own_rules() {
        assert!(TenantId::parse("(0)").is_ok());
        assert!(TenantId::parse("t-1").is_ok());
        assert_eq!(
            TenantId::parse("(1)").map(|_| ()),
            Err("may hold only A-Z a-z 0-9 . _ : -")
        );
        assert!(RequestId::parse("with space ok").is_ok());
        assert!(RequestId::parse("   ").is_ok());
        assert!(RequestId::parse("tab\there").is_err());
        assert!(RequestId::parse("").is_err());
        assert!(RequestId::recorded("   ").is_err());
        assert!(RequestId::recorded("with space ok").is_ok());
    }
}
