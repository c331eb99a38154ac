//! The flags of a service's command line: `--listen`, `--store`, `--config`, each with its
//! `WOW_*` twin, as `wow serve` has them.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, FromArgMatches};

use crate::settings::{Role, Settings, SettingsError};

/// The flags of a service. Flatten them into a command line of your own
/// (`#[command(flatten)]`), or let [`Settings::from_command_line`] read them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct ServeArgs {
    /// Where to listen [default: 127.0.0.1:8080].
    #[arg(long, env = "WOW_LISTEN")]
    pub listen: Option<String>,
    /// The store: sqlite://PATH, postgres://... or memory:// [default: the service's].
    #[arg(long, env = "WOW_STORE")]
    pub store: Option<String>,
    /// A TOML file of settings.
    #[arg(long, env = "WOW_CONFIG")]
    pub config: Option<PathBuf>,
    /// What this process does: monolith, gateway or processor [default: monolith].
    #[arg(long, value_enum)]
    pub role: Option<Role>,
}

impl ServeArgs {
    /// Reads the flags from `args` (the program's name first, as `std::env::args_os` gives
    /// them), with `--help` for the program `name`.
    ///
    /// # Errors
    ///
    /// A [`clap::Error`] for an unknown or malformed flag, and for `--help` (whose text is
    /// the error's; [`clap::Error::exit`] prints it and exits as a command line does).
    pub fn parse_from<I, T>(name: &'static str, args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let command = Self::augment_args(clap::Command::new(name));
        let matches = command.try_get_matches_from(args)?;
        Self::from_arg_matches(&matches)
    }

    /// The settings these flags make, with the `WOW_*` variables and the file they name.
    ///
    /// # Errors
    ///
    /// As [`Settings::resolve`].
    pub fn settings(self) -> Result<Settings, SettingsError> {
        let settings = Settings::resolve(self.listen, self.store, self.config.as_deref())?;
        match self.role {
            Some(role) => settings.with_role(role),
            None => Ok(settings),
        }
    }
}

impl Settings {
    /// The settings of this process: its flags (see [`ServeArgs`]), its `WOW_*` variables
    /// and the TOML file the flags name. On `--help` or a flag it does not know,
    /// prints what clap says and exits the process, as a command line does.
    ///
    /// # Errors
    ///
    /// As [`Settings::resolve`].
    pub fn from_command_line() -> Result<Self, SettingsError> {
        let name = program_name();
        let args =
            ServeArgs::parse_from(name, std::env::args_os()).unwrap_or_else(|error| error.exit());
        args.settings()
    }
}

/// The program's file name, for `--help`; leaked once (a process has one name).
fn program_name() -> &'static str {
    let name = std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|path| path.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "service".to_owned());
    Box::leak(name.into_boxed_str())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn reads_the_three_flags() {
        let args = ServeArgs::parse_from(
            "todo",
            [
                "todo",
                "--listen",
                "127.0.0.1:0",
                "--store",
                "memory://",
                "--config",
                "a.toml",
            ],
        )
        .unwrap();
        assert_eq!(args.listen.as_deref(), Some("127.0.0.1:0"));
        assert_eq!(args.store.as_deref(), Some("memory://"));
        assert_eq!(args.config, Some(PathBuf::from("a.toml")));
    }

    #[test]
    fn an_unknown_flag_is_an_error_and_help_names_the_program() {
        let error = ServeArgs::parse_from("todo", ["todo", "--lisen", "x"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::UnknownArgument);
        let help = ServeArgs::parse_from("todo", ["todo", "--help"]).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
        assert!(help.to_string().contains("--store"), "{help}");
    }
}
