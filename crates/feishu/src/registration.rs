//! "Create an app for me": Feishu's app self-registration, as its official command-line tool
//! does it, so a new user never visits the developer console.
//!
//! The app begins a registration on Feishu's accounts host (always Feishu's, whatever the
//! brand), shows the user `{open}/page/cli?user_code=…` as a QR code and a link, and polls with
//! the device code ([`crate::device::poll_until`]). The user confirms with Feishu on the phone or
//! in the sign-in window; the answer carries the new app's App ID and Secret and who confirmed,
//! with the tenant's brand. A Lark tenant's answer on Feishu's host has no secret: the same
//! device code is then polled on Lark's accounts host, which gives it. Each user gets their own
//! app (archetype `PersonalAgent`), with the scopes Feishu grants such apps without an
//! administrator already enabled.

use secrecy::{ExposeSecret as _, SecretString};
use serde_json::Value;

use crate::config::{Brand, Endpoints};
use crate::device::{
    DeviceCode, DeviceFlowError, Poll, poll_until, post_form, read_device_code, read_poll, refused,
};

/// What a confirmed registration gives.
#[derive(Debug, Clone)]
pub struct Registration {
    /// The new app's id (`cli_…`).
    pub app_id: String,
    /// Its secret: into the vault, never the settings file or a log.
    pub app_secret: SecretString,
    /// Who confirmed (`ou_…`), when Feishu says.
    pub open_id: Option<String>,
    /// The tenant's brand, from the answer.
    pub brand: Brand,
}

/// One poll's reading before the Lark re-poll.
#[derive(Debug)]
struct Answer {
    app_id: String,
    app_secret: Option<SecretString>,
    open_id: Option<String>,
    brand: Brand,
}

/// Talks to the registration endpoint of both brands.
#[derive(Debug, Clone)]
pub struct RegistrationClient {
    feishu: Endpoints,
    lark: Endpoints,
    /// The brand whose page the user is shown (the settings' brand).
    page: Brand,
    http: reqwest::Client,
}

impl RegistrationClient {
    /// A client for the brands' hosts (`feishu` for begin and the first polls, `lark` for a
    /// Lark tenant's re-poll), showing the user `page`'s verification page.
    pub fn new(feishu: Endpoints, lark: Endpoints, page: Brand) -> Result<Self, DeviceFlowError> {
        let http = crate::oauth::secret_client().map_err(|e| {
            DeviceFlowError::Malformed(format!("cannot build the HTTP client: {e}"))
        })?;
        Ok(RegistrationClient {
            feishu,
            lark,
            page,
            http,
        })
    }

    fn endpoints(&self, brand: Brand) -> &Endpoints {
        match brand {
            Brand::Feishu => &self.feishu,
            Brand::Lark => &self.lark,
        }
    }

    /// Begins a registration: the code to show and poll with.
    pub async fn begin(&self) -> Result<DeviceCode, DeviceFlowError> {
        let (status, value) = post_form(
            &self.http,
            &self.feishu.app_registration_url(),
            &[
                ("action", "begin"),
                ("archetype", "PersonalAgent"),
                ("auth_method", "client_secret"),
                ("request_user_info", "open_id tenant_brand"),
            ],
            None,
        )
        .await?;
        if status >= 400 || value.get("error").is_some() {
            return Err(refused(&value));
        }
        let page = self.endpoints(self.page).clone();
        // Feishu's tool builds the page itself and ignores any complete URI in the answer.
        let mut code = read_device_code(&value, 300, |user_code| {
            page.registration_page(user_code).to_string()
        })?;
        code.verification_uri_complete = page.registration_page(&code.user_code).to_string();
        Ok(code)
    }

    async fn poll_once(
        &self,
        brand: Brand,
        device_code: &SecretString,
    ) -> Result<Poll<Answer>, DeviceFlowError> {
        let (_, value) = post_form(
            &self.http,
            &self.endpoints(brand).app_registration_url(),
            &[
                ("action", "poll"),
                ("device_code", device_code.expose_secret()),
            ],
            None,
        )
        .await?;
        Ok(match read_poll(&value, "client_id")? {
            Poll::Pending => Poll::Pending,
            Poll::SlowDown => Poll::SlowDown,
            Poll::Done(()) => Poll::Done(read_answer(&value, brand)),
        })
    }

    /// Polls until the user confirms; re-polls a Lark tenant on Lark's host for the secret.
    pub async fn wait(&self, code: &DeviceCode) -> Result<Registration, DeviceFlowError> {
        let first = poll_until(code.interval, code.expires_in, || {
            self.poll_once(Brand::Feishu, &code.device_code)
        })
        .await?;
        let first_open_id = first.open_id.clone();
        let answer = match first.app_secret {
            Some(_) => first,
            None if first.brand == Brand::Lark => {
                poll_until(code.interval, code.expires_in, || {
                    self.poll_once(Brand::Lark, &code.device_code)
                })
                .await?
            }
            None => {
                return Err(DeviceFlowError::Malformed(
                    "the new app's secret is missing from Feishu's answer".to_owned(),
                ));
            }
        };
        let app_secret = answer.app_secret.ok_or_else(|| {
            DeviceFlowError::Malformed(
                "the new app's secret is missing from Lark's answer".to_owned(),
            )
        })?;
        Ok(Registration {
            app_id: answer.app_id,
            app_secret,
            open_id: answer.open_id.or(first_open_id),
            brand: answer.brand,
        })
    }
}

fn read_answer(value: &Value, polled: Brand) -> Answer {
    let text = |v: &Value, key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let user = value.get("user_info").cloned().unwrap_or(Value::Null);
    let brand = match text(&user, "tenant_brand").as_deref() {
        Some("lark") => Brand::Lark,
        Some("feishu") => Brand::Feishu,
        _ => polled,
    };
    Answer {
        app_id: text(value, "client_id").unwrap_or_default(),
        app_secret: text(value, "client_secret").map(SecretString::from),
        open_id: text(&user, "open_id"),
        brand,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_reads_its_brand_and_a_lark_answer_may_lack_the_secret() {
        let lark = read_answer(
            &json!({"client_id": "cli_1", "user_info": {"open_id": "ou_1", "tenant_brand": "lark"}}),
            Brand::Feishu,
        );
        assert_eq!(lark.brand, Brand::Lark);
        assert!(lark.app_secret.is_none());
        assert_eq!(lark.open_id.as_deref(), Some("ou_1"));
        let feishu = read_answer(
            &json!({"client_id": "cli_2", "client_secret": "s", "user_info": {"tenant_brand": "feishu"}}),
            Brand::Lark,
        );
        assert_eq!(feishu.brand, Brand::Feishu);
        assert_eq!(
            feishu
                .app_secret
                .as_ref()
                .map(|s| s.expose_secret().to_owned()),
            Some("s".to_owned())
        );
        // No brand in the answer: the host that answered.
        assert_eq!(
            read_answer(&json!({"client_id": "c"}), Brand::Lark).brand,
            Brand::Lark
        );
    }
}
