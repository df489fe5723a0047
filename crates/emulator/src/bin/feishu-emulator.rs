//! Serves the Feishu emulator on a loopback port, standing in for a real tenant in manual and
//! end-to-end tests: `feishu-emulator [--app ID:SECRET:REDIRECT_URL]… [--device-interval SECS]`.
//! `--device-interval` sets how often device-code clients may poll (app self-registration and
//! device sign-in; 5 s by default), so that end-to-end runs do not wait. Each `--app` is
//! registered with every scope the tools ask for enabled (`im:message` among them, so its bot can
//! send cards), the bot capability and the long connection on. Prints one JSON line with the base
//! URL and a user access token carrying every scope (for SDK cross-checks), then serves until
//! Ctrl-C or SIGTERM. Cards the bots sent show at `/_emulator/cards/preview`.

use std::io::Write as _;

use anyhow::{Context as _, bail};
use emulator::feishu::{App, FeishuEmulator, PREFERRED_SCOPES};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let emulator = FeishuEmulator::start()
        .await
        .context("starting the Feishu emulator")?;
    let mut args = std::env::args();
    // The first argument is the program's own path.
    args.next();
    let mut first_app = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--app" => {
                let spec = args.next().context("--app needs ID:SECRET:REDIRECT_URL")?;
                let mut parts = spec.splitn(3, ':');
                let (Some(id), Some(secret), Some(redirect)) =
                    (parts.next(), parts.next(), parts.next())
                else {
                    bail!("--app needs ID:SECRET:REDIRECT_URL, got {spec:?}");
                };
                let mut enabled: Vec<String> =
                    PREFERRED_SCOPES.iter().map(|s| (*s).to_owned()).collect();
                enabled.push("im:message.p2p_msg:get_as_user".to_owned());
                emulator.register_app(App {
                    app_id: id.to_owned(),
                    app_secret: secret.to_owned(),
                    redirect_uris: vec![redirect.to_owned()],
                    enabled_scopes: enabled,
                });
                first_app.get_or_insert_with(|| id.to_owned());
            }
            "--device-interval" => {
                let secs = args.next().context("--device-interval needs SECS")?;
                let secs: u64 = secs.parse().with_context(|| {
                    format!("--device-interval needs whole seconds, got {secs:?}")
                })?;
                emulator.set_device_interval(secs);
            }
            other => bail!(
                "unknown argument {other:?}; usage: feishu-emulator [--app ID:SECRET:REDIRECT_URL]… \
                 [--device-interval SECS]"
            ),
        }
    }
    let mut every: Vec<&str> = PREFERRED_SCOPES.to_vec();
    every.push("im:message.p2p_msg:get_as_user");
    let token = emulator.issue_token(first_app.as_deref().unwrap_or("cli_unregistered"), &every);
    writeln!(
        std::io::stdout(),
        "{}",
        serde_json::json!({"base_url": emulator.base_url(), "user_access_token": token})
    )?;
    stopped().await
}

#[cfg(unix)]
async fn stopped() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listening for SIGTERM")?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}

#[cfg(not(unix))]
async fn stopped() -> anyhow::Result<()> {
    tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")
}
