//! What a bearer token acts for: a tenant, and optionally an owner and a space inside it
//! (SPEC TN-2), written `tenant[/owner[/space]]`.

use std::fmt;
use std::str::FromStr;

use crate::ids::{Id, InvalidId, TenantId};

/// A token's binding. A token bound to the tenant alone reaches every owner's aggregates of
/// that tenant; one bound to an owner (and a space) reaches only that owner's (and space's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBinding {
    /// The tenant the token acts for.
    pub tenant: String,
    /// The owner it is bound to; `None`: every owner of the tenant.
    pub owner: Option<String>,
    /// The space it is bound to; `None`: every space of its owner.
    pub space: Option<String>,
}

impl TokenBinding {
    /// A token for the whole of `tenant`.
    pub fn tenant(tenant: impl Into<String>) -> Self {
        Self {
            tenant: tenant.into(),
            owner: None,
            space: None,
        }
    }

    /// This binding narrowed to `owner`.
    pub fn with_owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// This binding narrowed to `space`.
    pub fn with_space(mut self, space: impl Into<String>) -> Self {
        self.space = Some(space.into());
        self
    }

    /// Whether the token is bound to an owner or a space (not the whole tenant).
    pub fn is_bound(&self) -> bool {
        self.owner.is_some() || self.space.is_some()
    }
}

/// A binding written wrong: which part, and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{spec}` is not tenant[/owner[/space]]: {why}")]
pub struct InvalidBinding {
    /// The binding as written.
    pub spec: String,
    /// What is wrong with it.
    pub why: String,
}

impl FromStr for TokenBinding {
    type Err = InvalidBinding;

    /// Reads `tenant`, `tenant/owner` or `tenant/owner/space`: each part by the rules of an
    /// aggregate id (the tenant may also be the default tenant `(0)`), none empty, no fourth.
    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let invalid = |why: String| InvalidBinding {
            spec: spec.to_owned(),
            why,
        };
        let parts: Vec<&str> = spec.trim().split('/').map(str::trim).collect();
        if parts.len() > 3 {
            return Err(invalid(format!(
                "{} parts; at most three (tenant, owner, space)",
                parts.len()
            )));
        }
        for (index, (part, name)) in parts
            .iter()
            .zip(["the tenant", "the owner", "the space"])
            .enumerate()
        {
            if part.is_empty() {
                return Err(invalid(format!("{name} is empty")));
            }
            let checked = if index == 0 {
                TenantId::parse(part).map(|_| ())
            } else {
                Id::parse(part).map(|_| ()).map_err(InvalidId::rule)
            };
            checked.map_err(|rule| invalid(format!("{name} {rule}")))?;
        }
        let part = |i: usize| parts.get(i).map(|part| (*part).to_owned());
        Ok(Self {
            tenant: parts[0].to_owned(),
            owner: part(1),
            space: part(2),
        })
    }
}

impl fmt::Display for TokenBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.tenant)?;
        for part in [&self.owner, &self.space].into_iter().flatten() {
            write!(f, "/{part}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::TokenBinding;

    #[test]
    fn a_binding_reads_a_tenant_an_owner_and_a_space() {
        let read = |spec: &str| spec.parse::<TokenBinding>();
        assert_eq!(read("tenant-a"), Ok(TokenBinding::tenant("tenant-a")));
        assert_eq!(
            read("tenant-a/alice"),
            Ok(TokenBinding::tenant("tenant-a").with_owner("alice"))
        );
        assert_eq!(
            read(" tenant-a/alice/s1 "),
            Ok(TokenBinding::tenant("tenant-a")
                .with_owner("alice")
                .with_space("s1"))
        );
        assert_eq!(read("(0)/alice").map(|b| b.tenant), Ok("(0)".to_owned()));
        for wrong in [
            "a/b/c/d",
            "tenant-a/",
            "/alice",
            "",
            "tenant-a//s1",
            "t/al ice",
        ] {
            assert!(read(wrong).is_err(), "{wrong}");
        }
        assert_eq!(
            read("tenant-a/alice/s1").map(|b| b.to_string()),
            Ok("tenant-a/alice/s1".to_owned())
        );
    }
}
