//! Getting in without the developer console: "Connect my Feishu" creates the user's own Feishu
//! app by self-registration ([`feishu::registration`]), and sign-ins of such an app use the
//! device flow ([`feishu::device`]), so no redirect URL is ever registered.
//!
//! Terms. A *connect* is one self-registration: a QR code of Feishu's confirmation page, a
//! countdown, and on success the new App ID and Secret (vault), brand and `created_by_app`
//! (settings), applied at once without a restart. A *device sign-in* is a sign-in confirmed on
//! Feishu's verification page; what follows it (saving the tokens, resuming held calls, audit)
//! is the loopback sign-in's, unchanged. A connect that fails leaves nothing behind: the secret
//! is only written together with the settings that name its app, and removed again if those
//! cannot be saved.

pub mod qr;
pub(crate) mod status;
pub mod view;

use feishu::{Brand, Endpoints, RegistrationClient};

use crate::context::Context;
use crate::error::CompanionError;
use crate::events::SignInStatus;
use crate::feature::Feature;
use crate::options::APP_SECRET;
use crate::sync::lock;

pub use status::{ConnectFailure, ConnectStatus, DeviceTicket};

/// The "Connect my Feishu" in progress, and its code.
type ConnectSlot = std::sync::Mutex<Option<(tokio::task::JoinHandle<()>, DeviceTicket)>>;

/// "Connect my Feishu" as a feature (see [`crate::feature`]): the context and the one connect
/// in progress. The app keeps one.
pub(crate) type Connect = Feature<ConnectSlot>;

impl Connect {
    pub(crate) fn open(ctx: Context) -> Connect {
        Feature::new(ctx, ConnectSlot::default())
    }

    fn connect_slot(&self) -> &ConnectSlot {
        self.state()
    }
}

impl Connect {
    /// The registration client: the brands' real hosts, or the stand-in's when the app is
    /// pointed at one (tests; Lark then lives under `/lark` of the same base).
    fn registration_client(&self) -> Result<RegistrationClient, CompanionError> {
        let page = self.settings().feishu.brand;
        let (feishu, lark) = match self.feishu_base_override() {
            Some(base) => {
                let base = url::Url::parse(&base)
                    .map_err(|e| CompanionError::Other(format!("bad Feishu base URL: {e}")))?;
                (
                    Endpoints::emulated(&base, Brand::Feishu),
                    Endpoints::emulated(&base, Brand::Lark),
                )
            }
            None => (
                Endpoints::for_brand(Brand::Feishu),
                Endpoints::for_brand(Brand::Lark),
            ),
        };
        RegistrationClient::new(feishu, lark, page)
            .map_err(|e| CompanionError::Other(e.to_string()))
    }

    /// "Connect my Feishu": begins creating the user's own Feishu app and answers the code to
    /// show; the rest arrives as [`crate::UiEvent::Connect`]. On success the app switches to it
    /// at once and, when a model is configured, starts the first sign-in (device flow, the
    /// scopes that need no administrator).
    pub async fn connect_feishu(&self) -> Result<DeviceTicket, CompanionError> {
        self.stop_connect();
        let client = self.registration_client()?;
        let code = match client.begin().await {
            Ok(code) => code,
            Err(e) => {
                let failure = ConnectFailure::from_flow(&e);
                self.emit_connect(ConnectStatus::Failed(failure.clone()));
                return Err(CompanionError::Other(failure.words().en));
            }
        };
        let ticket = DeviceTicket::new(&code);
        self.emit_connect(ConnectStatus::Waiting(ticket.clone()));
        let me = self.clone();
        let task = tokio::spawn(async move {
            let status = match client.wait(&code).await {
                Ok(registration) => me.connected(registration).await,
                Err(e) => ConnectStatus::Failed(ConnectFailure::from_flow(&e)),
            };
            let sign_in_next = matches!(
                status,
                ConnectStatus::Connected {
                    needs_model: false,
                    ..
                }
            );
            // The UI hears "connected" before the first sign-in's code (step 1, then step 2).
            me.emit_connect(status);
            if sign_in_next {
                me.first_sign_in().await;
            }
        });
        self.set_connect_task(task, ticket.clone());
        Ok(ticket)
    }

    /// The user cancelled connecting: polling stops, nothing is saved.
    pub fn cancel_connect(&self) {
        if self.stop_connect() {
            self.emit_connect(ConnectStatus::Failed(ConnectFailure::Cancelled));
        }
    }

    /// The page of the connect waiting now, for the sign-in window.
    pub fn connect_page(&self) -> Option<String> {
        self.connect_waiting().map(|t| t.url)
    }

    /// Saves the new app, switches to it, and starts the first sign-in when it can.
    async fn connected(&self, registration: feishu::Registration) -> ConnectStatus {
        use secrecy::ExposeSecret as _;
        let mut settings = self.settings();
        settings.feishu.app_id = registration.app_id.clone();
        settings.feishu.brand = registration.brand;
        settings.feishu.created_by_app = true;
        if let Err(e) = self.vault().put(
            APP_SECRET,
            registration.app_secret.expose_secret().as_bytes(),
        ) {
            return ConnectStatus::Failed(ConnectFailure::Other(e.to_string()));
        }
        if let Err(e) = crate::apply::apply_settings(self, settings).await {
            // Half a connect is worse than none: the secret goes with the settings it needed.
            let _ = self.vault().delete(APP_SECRET);
            return ConnectStatus::Failed(ConnectFailure::Other(e.to_string()));
        }
        tracing::info!(brand = ?registration.brand, "connected to a new Feishu app");
        let needs_model = self.is_demo();
        ConnectStatus::Connected {
            app_id: registration.app_id,
            brand: registration.brand,
            needs_model,
        }
    }

    /// The first sign-in of a new app: the reads Feishu grants without an administrator.
    async fn first_sign_in(&self) {
        let scopes = feishu::FIRST_SIGN_IN_SCOPES
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        if let Err(e) = crate::sign_in::begin(self, scopes).await {
            tracing::warn!(error = %e, "the first sign-in after connecting did not start");
            self.announce(SignInStatus::Failed {
                message: e.to_string(),
            });
        }
    }

    /// "Connect my Feishu", for the UI.
    pub async fn connect_feishu_view(&self) -> Result<view::ConnectView, CompanionError> {
        let ticket = self.connect_feishu().await?;
        Ok(view::ConnectView::from(&ConnectStatus::Waiting(ticket)))
    }

    fn emit_connect(&self, status: ConnectStatus) {
        self.emit(crate::UiEvent::Connect(status));
    }

    fn set_connect_task(&self, task: tokio::task::JoinHandle<()>, ticket: DeviceTicket) {
        *lock(self.connect_slot()) = Some((task, ticket));
    }

    /// Stops the connect in progress; whether one was running.
    fn stop_connect(&self) -> bool {
        match lock(self.connect_slot()).take() {
            Some((task, _)) => {
                let running = !task.is_finished();
                task.abort();
                running
            }
            None => false,
        }
    }

    fn connect_waiting(&self) -> Option<DeviceTicket> {
        lock(self.connect_slot())
            .as_ref()
            .filter(|(task, _)| !task.is_finished())
            .map(|(_, ticket)| ticket.clone())
    }
}
