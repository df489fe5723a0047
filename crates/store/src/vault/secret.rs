//! [`SecretString`]: a token, the app secret or an API key, kept out of logs and wiped on drop.

use std::fmt;

use serde::{Deserialize, Deserializer};
use zeroize::Zeroizing;

/// A secret string: `Debug` and `Display` print `***`, and the memory is wiped when dropped.
///
/// Reading it takes an explicit [`expose_secret`](SecretString::expose_secret). It deserialises
/// like a string but does not implement `Serialize`: a struct holding one cannot be sent to the UI
/// or written out by accident. Where a secret must be serialised (into the [`Vault`](super::Vault)),
/// the field says so with `#[serde(with = "store::vault::expose_secret")]`.
///
/// No `PartialEq` either: compare what [`expose_secret`](SecretString::expose_secret) returns
/// where that is really meant (and in constant time where an attacker could time it).
#[derive(Clone, Default)]
pub struct SecretString(Zeroizing<String>);

impl SecretString {
    /// Wraps `secret`; the `String` is moved in, so no copy is left behind.
    pub fn new(secret: String) -> SecretString {
        SecretString(Zeroizing::new(secret))
    }

    /// The secret itself. Every call is a place the secret leaves this type: keep them few.
    pub fn expose_secret(&self) -> &str {
        &self.0
    }

    /// Whether the secret is empty (an unset setting).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for SecretString {
    fn from(secret: String) -> SecretString {
        SecretString::new(secret)
    }
}

impl From<&str> for SecretString {
    fn from(secret: &str) -> SecretString {
        SecretString::new(secret.to_owned())
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl<'de> Deserialize<'de> for SecretString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<SecretString, D::Error> {
        String::deserialize(deserializer).map(SecretString::new)
    }
}

/// `#[serde(with = "store::vault::expose_secret")]` on a [`SecretString`] field: serialises the
/// secret itself. Only for values that go into the vault.
pub mod expose_secret {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::SecretString;

    /// Writes the secret as a plain string.
    pub fn serialize<S: Serializer>(
        secret: &SecretString,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(secret.expose_secret())
    }

    /// Reads a plain string.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<SecretString, D::Error> {
        SecretString::deserialize(deserializer)
    }
}
