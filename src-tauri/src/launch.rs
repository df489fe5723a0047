//! How the app was started: its command line and environment.

use std::ffi::OsString;
use std::path::PathBuf;

/// Keeps all data under this folder instead of the platform's (tests, portable installs).
pub const DATA_DIR_ENV: &str = "FEISHU_COMPANION_DATA_DIR";
/// `1`: keep the vault's master key in memory only (tests; secrets do not survive a restart).
pub const EPHEMERAL_KEYS_ENV: &str = "FEISHU_COMPANION_EPHEMERAL_KEYS";
/// `1`: demo mode (built-in Feishu emulator and scripted model) even when configured.
pub const DEMO_ENV: &str = "FEISHU_COMPANION_DEMO";
/// Where the user's own Feishu app is served instead of the brand's hosts: a local emulator
/// standing in for a real tenant (end-to-end tests, trials).
pub const FEISHU_BASE_URL_ENV: &str = "FEISHU_COMPANION_FEISHU_BASE_URL";

/// Serve connected agents on this port instead of the usual one (end-to-end tests; `0`: any).
pub const AGENTS_PORT_ENV: &str = "FEISHU_COMPANION_AGENTS_PORT";

/// What `--help` prints.
pub const USAGE: &str = "\
Usage: feishu-companion [--data-dir <dir>] [--ephemeral-keys] [--demo]
       feishu-companion mcp [--token <token>]   (the stdio relay for other agents; mcp --help)

  --data-dir <dir>   keep settings and data under <dir>      (env FEISHU_COMPANION_DATA_DIR)
  --ephemeral-keys   master key in memory only, for tests    (env FEISHU_COMPANION_EPHEMERAL_KEYS=1)
  --demo             built-in Feishu emulator and model      (env FEISHU_COMPANION_DEMO=1)

  env FEISHU_COMPANION_FEISHU_BASE_URL=<url>   serve your own Feishu app from <url> (an emulator
                                               standing in for a tenant, in tests)
";

/// The options of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Launch {
    /// All data under this folder (`AppPaths::under`), else the platform's folders.
    pub data_dir: Option<PathBuf>,
    /// The vault's master key in memory only.
    pub ephemeral_keys: bool,
    /// Demo mode even when Feishu and a model are configured.
    pub demo: bool,
    /// The user's own Feishu app served from here instead of the brand's hosts.
    pub feishu_base_url: Option<String>,
    /// Connected agents are served on this port instead of the usual one.
    pub agents_port: Option<u16>,
}

/// A command line the app does not understand.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LaunchError {
    /// `--help`: not a failure, the caller prints [`USAGE`].
    #[error("usage requested")]
    Help,
    /// `--data-dir` without its folder.
    #[error("--data-dir needs a folder")]
    MissingDataDir,
    /// Anything else. Refused rather than ignored, so a mistyped `--demo` cannot start the app
    /// on the user's real data.
    #[error("unknown option {0:?}\n\n{USAGE}")]
    Unknown(String),
}

impl Launch {
    /// Reads the options from `args` (without the program name) and the environment `env`;
    /// a flag and its variable mean the same, and either turns an option on.
    pub fn parse(
        args: impl IntoIterator<Item = OsString>,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Launch, LaunchError> {
        let truthy = |name: &str| {
            env(name).is_some_and(|v| {
                matches!(
                    v.to_string_lossy().trim().to_ascii_lowercase().as_str(),
                    "1" | "true" | "yes"
                )
            })
        };
        let mut launch = Launch {
            data_dir: env(DATA_DIR_ENV)
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
            ephemeral_keys: truthy(EPHEMERAL_KEYS_ENV),
            demo: truthy(DEMO_ENV),
            feishu_base_url: env(FEISHU_BASE_URL_ENV)
                .map(|v| v.to_string_lossy().trim().to_owned())
                .filter(|v| !v.is_empty()),
            agents_port: env(AGENTS_PORT_ENV).and_then(|v| v.to_string_lossy().trim().parse().ok()),
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let text = arg.to_string_lossy();
            match text.as_ref() {
                "--help" | "-h" => return Err(LaunchError::Help),
                "--demo" => launch.demo = true,
                "--ephemeral-keys" => launch.ephemeral_keys = true,
                "--data-dir" => {
                    let dir = args.next().ok_or(LaunchError::MissingDataDir)?;
                    launch.data_dir = Some(PathBuf::from(dir));
                }
                other => match other.strip_prefix("--data-dir=") {
                    Some("") => return Err(LaunchError::MissingDataDir),
                    Some(dir) => launch.data_dir = Some(PathBuf::from(dir)),
                    None => return Err(LaunchError::Unknown(other.to_owned())),
                },
            }
        }
        Ok(launch)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<Launch, LaunchError> {
        let env: Vec<(String, OsString)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        Launch::parse(args.iter().map(OsString::from), |name| {
            env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn nothing_given_means_the_platform_folders_and_the_keychain() {
        assert_eq!(parse(&[], &[]), Ok(Launch::default()));
    }

    #[test]
    fn the_agents_port_comes_from_its_variable_and_nonsense_is_ignored() {
        let port = parse(&[], &[(AGENTS_PORT_ENV, "0")]).unwrap();
        assert_eq!(port.agents_port, Some(0));
        let nonsense = parse(&[], &[(AGENTS_PORT_ENV, "http")]).unwrap();
        assert_eq!(nonsense.agents_port, None);
    }

    #[test]
    fn flags_and_variables_mean_the_same() {
        let want = Launch {
            data_dir: Some(PathBuf::from("/tmp/fc")),
            ephemeral_keys: true,
            demo: true,
            feishu_base_url: None,
            agents_port: None,
        };
        assert_eq!(
            parse(
                &["--data-dir", "/tmp/fc", "--ephemeral-keys", "--demo"],
                &[]
            ),
            Ok(want.clone())
        );
        assert_eq!(
            parse(&["--data-dir=/tmp/fc", "--ephemeral-keys", "--demo"], &[]),
            Ok(want.clone())
        );
        assert_eq!(
            parse(
                &[],
                &[
                    (DATA_DIR_ENV, "/tmp/fc"),
                    (EPHEMERAL_KEYS_ENV, "1"),
                    (DEMO_ENV, "true")
                ]
            ),
            Ok(want)
        );
    }

    #[test]
    fn the_command_line_wins_over_the_environment_for_the_folder() {
        let launch = parse(&["--data-dir", "/a"], &[(DATA_DIR_ENV, "/b")]);
        assert_eq!(launch.map(|l| l.data_dir), Ok(Some(PathBuf::from("/a"))));
    }

    #[test]
    fn false_looking_variables_leave_options_off() {
        let launch = parse(&[], &[(DEMO_ENV, "0"), (EPHEMERAL_KEYS_ENV, "")]);
        assert_eq!(launch, Ok(Launch::default()));
    }

    #[test]
    fn mistakes_are_refused() {
        assert_eq!(
            parse(&["--data-dir"], &[]),
            Err(LaunchError::MissingDataDir)
        );
        assert_eq!(
            parse(&["--data-dir="], &[]),
            Err(LaunchError::MissingDataDir)
        );
        assert_eq!(
            parse(&["--demo-mode"], &[]),
            Err(LaunchError::Unknown("--demo-mode".into()))
        );
        assert_eq!(parse(&["--help"], &[]), Err(LaunchError::Help));
    }
}
