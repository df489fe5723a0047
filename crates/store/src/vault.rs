//! The token vault: the user's Feishu tokens, the app secret and the model API keys, encrypted at
//! rest in the store's `secrets` table (design.md §3).
//!
//! Each secret is encrypted with AES-256-GCM under the *master key*, with a fresh random 96-bit
//! nonce on every write and the secret's name as associated data: a ciphertext altered in any
//! way, or copied under another name, does not decrypt. The master key is never in the database:
//! it is kept by a [`MasterKeySource`], in the app the OS keychain with a key file as the fallback
//! ([`fallback_chain`]). Each row records the fingerprint of the key that wrote it
//! ([`MasterKey::id`]), so the right key is found before anything is decrypted and a new key is
//! never made while secrets written under another one exist.
//!
//! Nothing secret is ever logged or put in an error: errors name the secret and say what to do.
//! Plaintext handed out is [`Zeroizing`] (wiped on drop), and [`SecretString`] keeps a token out
//! of `Debug` and `Display` output.
//!
//! ```
//! use std::sync::Arc;
//! use store::Store;
//! use store::vault::{MemoryKeySource, SecretString, Vault};
//!
//! let store = Arc::new(Store::open_in_memory()?);
//! let vault = Vault::open(store, Box::new(MemoryKeySource::new()))?;
//! vault.put("feishu.app_secret", b"s3cr3t")?;
//! assert_eq!(vault.get("feishu.app_secret")?.as_deref().map(Vec::as_slice), Some(&b"s3cr3t"[..]));
//!
//! let token = SecretString::from("u-abc");
//! assert_eq!(format!("{token} {token:?}"), "*** ***");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod keys;
mod secret;

use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use aes_gcm::aead::{AeadInOut, KeyInit, Nonce};
use aes_gcm::{Aes256Gcm, Key};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use serde::de::DeserializeOwned;
use zeroize::Zeroizing;

use crate::{Store, StoreError};

pub use keys::{
    FallbackChain, KeyFile, KeySourceError, KeySourceNotice, MASTER_KEY_LEN, MasterKey,
    MasterKeySource, MemoryKeySource, OsKeychain, fallback_chain,
};
pub use secret::{SecretString, expose_secret};

/// AES-GCM's nonce length: 96 bits.
const NONCE_LEN: usize = 12;
/// Longest secret name accepted. Names are the app's own constants, not user data.
const MAX_NAME_LEN: usize = 200;
/// Prefixed to the name in the associated data, so the format can change without ambiguity.
const AAD_PREFIX: &[u8] = b"feishu-companion secret v1\0";

/// A vault failure. Messages name the secret (never its value) and say what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VaultError {
    /// The master key could not be loaded or created.
    #[error("the vault's master key is not available: {0}")]
    KeySource(#[from] KeySourceError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The vault holds secrets, and none of the keys that could be found wrote them.
    #[error(
        "the secrets in {} were encrypted with master key {}, but {} {}. They have been left untouched. If the keychain is locked or was moved, unlock or restore it and start the app again; if the key is lost, the secrets cannot be recovered: remove them and sign in again.",
        path.display(),
        stored.join(", "),
        source_description,
        found_keys(found)
    )]
    NoMatchingKey {
        /// The database file.
        path: PathBuf,
        /// The key ids recorded with the stored secrets.
        stored: Vec<String>,
        /// Where the key was looked for.
        source_description: String,
        /// The ids of the keys found there.
        found: Vec<String>,
    },
    /// A stored secret does not decrypt under its key: it was altered, copied from another name,
    /// or its key id does not match the key that wrote it.
    #[error(
        "the secret {name:?} in {} cannot be decrypted: it was altered, copied from another secret, or written with another master key. It has been left untouched; enter it again (or sign in again) to replace it.",
        path.display()
    )]
    Undecryptable {
        /// The secret's name.
        name: String,
        /// The database file.
        path: PathBuf,
    },
    /// A stored secret was written with a master key other than the vault's.
    #[error(
        "the secret {name:?} in {} was written with master key {found}, not with this vault's key {current}. It has been left untouched; enter it again (or sign in again) to replace it.",
        path.display()
    )]
    OtherKey {
        /// The secret's name.
        name: String,
        /// The database file.
        path: PathBuf,
        /// The key id recorded with the secret.
        found: String,
        /// The vault's key id.
        current: String,
    },
    /// A stored row is malformed (for instance a nonce of the wrong length).
    #[error(
        "the secret {name:?} in {} is damaged ({problem}). It has been left untouched; enter it again (or sign in again) to replace it.",
        path.display()
    )]
    Damaged {
        /// The secret's name.
        name: String,
        /// The database file.
        path: PathBuf,
        /// What is wrong with the row.
        problem: String,
    },
    /// A value could not be turned into JSON for [`Vault::put_json`].
    #[error("cannot store the secret {name:?}: its value cannot be written as JSON ({problem})")]
    Encode {
        /// The secret's name.
        name: String,
        /// The kind of problem (serde's own message is not kept: it may quote the value).
        problem: &'static str,
    },
    /// A stored secret decrypted but is not the JSON [`Vault::get_json`] expected.
    #[error(
        "the secret {name:?} is not a valid {type_name} ({problem} at line {line}, column {column}); it has been left untouched"
    )]
    Decode {
        /// The secret's name.
        name: String,
        /// The Rust type asked for.
        type_name: &'static str,
        /// The kind of problem (serde's own message is not kept: it may quote the value).
        problem: &'static str,
        /// Where in the JSON.
        line: usize,
        /// Where in the JSON.
        column: usize,
    },
    /// Secret names are non-empty and short.
    #[error("{0:?} is not a valid secret name: it must be 1 to 200 bytes long")]
    InvalidName(String),
    /// The operating system's random source failed.
    #[error("cannot encrypt the secret {name:?}: the system's random source failed ({detail})")]
    Random {
        /// The secret's name.
        name: String,
        /// The random source's error.
        detail: String,
    },
    /// AES-GCM refused to encrypt (only possible for values of many gigabytes).
    #[error("cannot encrypt the secret {0:?}: the value is too large")]
    TooLarge(String),
    /// The vault's master key is missing or unusable, so no secret can be read or written until
    /// the user forgets the stored secrets ([`Vault::forget_all`]).
    #[error(
        "the stored secrets cannot be used: {reason} To start again without them, choose Settings → Data → \"Sign out and forget all secrets\" (conversations, rules and the audit trail are kept)."
    )]
    Locked {
        /// Why (the error met when opening).
        reason: String,
    },
}

/// Where the vault's key stands.
enum KeyState {
    /// The key is in hand.
    Unlocked {
        key_id: String,
        cipher: Box<Aes256Gcm>,
    },
    /// The key is lost or unusable: every stored secret is unreadable.
    Locked { reason: String },
}

/// A stored secret that cannot be read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The secret's name.
    pub name: String,
    /// Why, worded for the user (never the value).
    pub problem: String,
}

/// Whether the vault's secrets can be read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VaultHealth {
    /// Why no secret can be read (the master key is lost or unusable), if so.
    pub locked: Option<String>,
    /// The secrets that cannot be read (every one, when locked).
    pub unreadable: Vec<Unreadable>,
}

fn found_keys(found: &[String]) -> String {
    if found.is_empty() {
        "holds no master key".to_owned()
    } else {
        format!("holds only {}", found.join(", "))
    }
}

fn json_problem(err: &serde_json::Error) -> &'static str {
    match err.classify() {
        serde_json::error::Category::Io => "an I/O error",
        serde_json::error::Category::Syntax => "not valid JSON",
        serde_json::error::Category::Data => "the wrong type or shape",
        serde_json::error::Category::Eof => "the JSON ends early",
    }
}

/// The encrypted secrets of one store, under one master key. See the [module docs](self).
pub struct Vault {
    store: Arc<Store>,
    keys: Box<dyn MasterKeySource>,
    state: std::sync::RwLock<KeyState>,
    notice: Option<KeySourceNotice>,
}

impl fmt::Debug for Vault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vault")
            .field("store", &self.store.path())
            .field("keys", &self.keys)
            .field("key_id", &self.key_id())
            .finish_non_exhaustive()
    }
}

impl Vault {
    /// Opens the vault of `store` with the master key from `keys`.
    ///
    /// When the vault already holds secrets, the key that wrote them is looked for among every key
    /// `keys` can reach ([`MasterKeySource::load_all`]); none matching is
    /// [`VaultError::NoMatchingKey`] and nothing is changed. A new key is created only for an
    /// empty vault.
    pub fn open(store: Arc<Store>, keys: Box<dyn MasterKeySource>) -> Result<Vault, VaultError> {
        let stored = stored_key_ids(&store)?;
        let key = Vault::find_key(&store, keys.as_ref(), stored)?;
        let notice = keys.notice();
        tracing::debug!(key_id = key.id(), keys = %keys.description(), "vault opened");
        Ok(Vault {
            store,
            keys,
            state: std::sync::RwLock::new(unlocked(&key)),
            notice,
        })
    }

    /// Like [`Vault::open`], but a master key that is lost, replaced or damaged does not stop
    /// the app: the vault opens *locked* ([`Vault::health`] says why; reading or writing a
    /// secret is [`VaultError::Locked`]) until the user forgets the secrets with
    /// [`Vault::forget_all`]. Nothing is deleted or replaced by opening.
    pub fn open_or_locked(
        store: Arc<Store>,
        keys: Box<dyn MasterKeySource>,
    ) -> Result<Vault, VaultError> {
        let reason = match stored_key_ids(&store)
            .and_then(|stored| Vault::find_key(&store, keys.as_ref(), stored))
        {
            Ok(key) => {
                let notice = keys.notice();
                return Ok(Vault {
                    store,
                    keys,
                    state: std::sync::RwLock::new(unlocked(&key)),
                    notice,
                });
            }
            Err(e @ (VaultError::NoMatchingKey { .. } | VaultError::KeySource(_))) => e.to_string(),
            Err(other) => return Err(other),
        };
        tracing::warn!(%reason, "the vault is locked: its master key is not available");
        let notice = keys.notice();
        Ok(Vault {
            store,
            keys,
            state: std::sync::RwLock::new(KeyState::Locked { reason }),
            notice,
        })
    }

    fn find_key(
        store: &Store,
        keys: &dyn MasterKeySource,
        stored: Vec<String>,
    ) -> Result<MasterKey, VaultError> {
        if stored.is_empty() {
            return Ok(keys.load_or_create()?);
        }
        let found = keys.load_all()?;
        let found_ids: Vec<String> = found.iter().map(|k| k.id().to_owned()).collect();
        found
            .into_iter()
            .find(|k| stored.iter().any(|id| id == k.id()))
            .ok_or_else(|| VaultError::NoMatchingKey {
                path: store.path().to_path_buf(),
                stored,
                source_description: keys.description(),
                found: found_ids,
            })
    }

    fn state(&self) -> std::sync::RwLockReadGuard<'_, KeyState> {
        // The state is replaced whole, never left half-written by a panic.
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The fingerprint of the master key in use (empty while locked).
    pub fn key_id(&self) -> String {
        match &*self.state() {
            KeyState::Unlocked { key_id, .. } => key_id.clone(),
            KeyState::Locked { .. } => String::new(),
        }
    }

    /// Which secrets cannot be read, and why; every one, with the reason, when locked.
    pub fn health(&self) -> Result<VaultHealth, VaultError> {
        let names = self.names()?;
        if let KeyState::Locked { reason } = &*self.state() {
            return Ok(VaultHealth {
                locked: Some(reason.clone()),
                unreadable: names
                    .into_iter()
                    .map(|name| Unreadable {
                        name,
                        problem: reason.clone(),
                    })
                    .collect(),
            });
        }
        let mut unreadable = Vec::new();
        for name in names {
            match self.get(&name) {
                Ok(_) => {}
                Err(VaultError::Store(e)) => return Err(VaultError::Store(e)),
                Err(e) => unreadable.push(Unreadable {
                    name,
                    problem: e.to_string(),
                }),
            }
        }
        Ok(VaultHealth {
            locked: None,
            unreadable,
        })
    }

    /// Deletes every stored secret (sign-ins, the App Secret, model keys) and, if the vault was
    /// locked, takes a usable master key: the existing one, or a new one after a damaged one is
    /// set aside (renamed, never deleted). Returns how many secrets were deleted. Everything
    /// else in the database is kept.
    pub fn forget_all(&self) -> Result<usize, VaultError> {
        let mut state = self
            .state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let deleted = self
            .store
            .conn()
            .execute("DELETE FROM secrets", [])
            .map_err(|e| self.store.db_err(e))?;
        if matches!(&*state, KeyState::Locked { .. }) {
            let key = match self.keys.load_or_create() {
                Ok(key) => key,
                Err(e) => {
                    tracing::warn!(error = %e, "setting the unusable master key aside");
                    self.keys.set_aside_unusable()?;
                    self.keys.load_or_create()?
                }
            };
            *state = unlocked(&key);
        }
        tracing::info!(deleted, "forgot every stored secret");
        Ok(deleted)
    }

    /// Where the master key is kept, for people.
    pub fn key_source(&self) -> String {
        self.keys.description()
    }

    /// What the user should be told about where the master key is kept (the keychain was not
    /// available and a key file is used), if anything.
    pub fn key_notice(&self) -> Option<&KeySourceNotice> {
        self.notice.as_ref()
    }

    /// Encrypts `value` and stores it under `name`, replacing any previous value.
    pub fn put(&self, name: &str, value: &[u8]) -> Result<(), VaultError> {
        check_name(name)?;
        let state = self.state();
        let (key_id, cipher) = match &*state {
            KeyState::Unlocked { key_id, cipher } => (key_id, cipher),
            KeyState::Locked { reason } => {
                return Err(VaultError::Locked {
                    reason: reason.clone(),
                });
            }
        };
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| VaultError::Random {
            name: name.to_owned(),
            detail: e.to_string(),
        })?;
        // Sized for the tag up front: the plaintext copy is encrypted where it lies and the buffer
        // never reallocates, so no plaintext is left behind in freed memory.
        let mut buffer = Zeroizing::new(Vec::with_capacity(value.len() + 16));
        buffer.extend_from_slice(value);
        cipher
            .encrypt_in_place(
                <&Nonce<Aes256Gcm>>::from(&nonce),
                &associated_data(name),
                &mut *buffer,
            )
            .map_err(|_| VaultError::TooLarge(name.to_owned()))?;
        let now = agent::now_millis();
        self.store
            .conn()
            .execute(
                "INSERT INTO secrets (name, nonce, ciphertext, key_id, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (name) DO UPDATE SET nonce = excluded.nonce,
                     ciphertext = excluded.ciphertext, key_id = excluded.key_id,
                     updated_at = excluded.updated_at",
                params![name, &nonce[..], buffer.as_slice(), key_id, now],
            )
            .map_err(|e| self.store.db_err(e))?;
        tracing::debug!(secret = name, "stored a secret");
        Ok(())
    }

    /// The value stored under `name`, decrypted; `None` when there is none. A row that does not
    /// decrypt is an error naming the secret, and is left as it is.
    pub fn get(&self, name: &str) -> Result<Option<Zeroizing<Vec<u8>>>, VaultError> {
        let row: Option<(Vec<u8>, Zeroizing<Vec<u8>>, String)> = self
            .store
            .conn()
            .query_row(
                "SELECT nonce, ciphertext, key_id FROM secrets WHERE name = ?1",
                [name],
                |r| Ok((r.get(0)?, Zeroizing::new(r.get(1)?), r.get(2)?)),
            )
            .optional()
            .map_err(|e| self.store.db_err(e))?;
        let Some((nonce, mut buffer, key_id)) = row else {
            return Ok(None);
        };
        let state = self.state();
        let (current, cipher) = match &*state {
            KeyState::Unlocked { key_id, cipher } => (key_id, cipher),
            KeyState::Locked { reason } => {
                return Err(VaultError::Locked {
                    reason: reason.clone(),
                });
            }
        };
        let path = || self.store.path().to_path_buf();
        if key_id != *current {
            return Err(VaultError::OtherKey {
                name: name.to_owned(),
                path: path(),
                found: key_id,
                current: current.clone(),
            });
        }
        let nonce: [u8; NONCE_LEN] =
            nonce
                .as_slice()
                .try_into()
                .map_err(|_| VaultError::Damaged {
                    name: name.to_owned(),
                    path: path(),
                    problem: format!("its nonce is {} bytes instead of {NONCE_LEN}", nonce.len()),
                })?;
        // Decrypted in place: the plaintext only ever exists in this zeroizing buffer. The tag is
        // checked before anything is decrypted, so a failure leaves no plaintext at all.
        cipher
            .decrypt_in_place(
                <&Nonce<Aes256Gcm>>::from(&nonce),
                &associated_data(name),
                &mut *buffer,
            )
            .map_err(|_| VaultError::Undecryptable {
                name: name.to_owned(),
                path: path(),
            })?;
        tracing::debug!(secret = name, "read a secret");
        Ok(Some(buffer))
    }

    /// Removes the secret `name`; true if there was one.
    pub fn delete(&self, name: &str) -> Result<bool, VaultError> {
        let deleted = self
            .store
            .conn()
            .execute("DELETE FROM secrets WHERE name = ?1", [name])
            .map_err(|e| self.store.db_err(e))?;
        tracing::debug!(secret = name, existed = deleted > 0, "deleted a secret");
        Ok(deleted > 0)
    }

    /// The names of every stored secret, sorted.
    pub fn names(&self) -> Result<Vec<String>, VaultError> {
        let conn = self.store.conn();
        let mut stmt = conn
            .prepare_cached("SELECT name FROM secrets ORDER BY name")
            .map_err(|e| self.store.db_err(e))?;
        stmt.query_map([], |r| r.get(0))
            .and_then(Iterator::collect)
            .map_err(|e| self.store.db_err(e).into())
    }

    /// Stores `value` as JSON. Fields of type [`SecretString`] need
    /// `#[serde(with = "store::vault::expose_secret")]`, so a secret is serialised only where
    /// someone wrote that down.
    pub fn put_json<T: Serialize + ?Sized>(&self, name: &str, value: &T) -> Result<(), VaultError> {
        let mut json = ZeroizingWriter::default();
        serde_json::to_writer(&mut json, value).map_err(|e| VaultError::Encode {
            name: name.to_owned(),
            problem: json_problem(&e),
        })?;
        self.put(name, &json.0)
    }

    /// The JSON value stored under `name`, parsed as `T`; `None` when there is none.
    pub fn get_json<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, VaultError> {
        let Some(json) = self.get(name)? else {
            return Ok(None);
        };
        serde_json::from_slice(&json)
            .map(Some)
            .map_err(|e| VaultError::Decode {
                name: name.to_owned(),
                type_name: std::any::type_name::<T>(),
                problem: json_problem(&e),
                line: e.line(),
                column: e.column(),
            })
    }
}

fn unlocked(key: &MasterKey) -> KeyState {
    KeyState::Unlocked {
        key_id: key.id().to_owned(),
        cipher: Box::new(Aes256Gcm::new(<&Key<Aes256Gcm>>::from(key.bytes()))),
    }
}

fn check_name(name: &str) -> Result<(), VaultError> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(VaultError::InvalidName(name.to_owned()));
    }
    Ok(())
}

fn associated_data(name: &str) -> Vec<u8> {
    [AAD_PREFIX, name.as_bytes()].concat()
}

fn stored_key_ids(store: &Store) -> Result<Vec<String>, VaultError> {
    let conn = store.conn();
    let mut stmt = conn
        .prepare("SELECT DISTINCT key_id FROM secrets ORDER BY key_id")
        .map_err(|e| store.db_err(e))?;
    stmt.query_map([], |r| r.get(0))
        .and_then(Iterator::collect)
        .map_err(|e| store.db_err(e).into())
}

/// A `Write` into a zeroizing buffer that, when it must grow, moves into a bigger zeroizing
/// buffer itself, so no reallocation leaves a copy of the JSON behind in freed memory.
#[derive(Default)]
struct ZeroizingWriter(Zeroizing<Vec<u8>>);

impl Write for ZeroizingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let needed = self.0.len() + buf.len();
        if needed > self.0.capacity() {
            let mut bigger = Zeroizing::new(Vec::with_capacity(needed.max(64).next_power_of_two()));
            bigger.extend_from_slice(&self.0);
            // The old buffer is wiped as it is dropped here.
            self.0 = bigger;
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
