//! The Streamable HTTP transport a remote server's connection is made with: one HTTP client
//! per connection, headers (secrets among them) marked sensitive, and no redirects followed.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

/// The transport to `url`, sending `headers` with every request.
pub(crate) fn transport(
    url: &str,
    headers: &BTreeMap<String, String>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    let client = client()?;
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("{name:?} is not a valid header name"))?;
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| format!("the value of header {name} is not valid in a header"))?;
        value.set_sensitive(true);
        custom.insert(name, value);
    }
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(custom);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

/// An HTTP client for a server's requests.
pub(crate) fn client() -> Result<reqwest::Client, String> {
    install_crypto();
    // Headers may carry credentials: they must not follow a redirect to another server.
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))
}

/// reqwest is built without a TLS crypto provider of its own: ring is installed as the
/// process's (once; later calls find it there).
pub(crate) fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
