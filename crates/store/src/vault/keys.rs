//! The vault's master key and the places it is kept: the OS keychain, a key file readable only by
//! the user, or memory (tests). [`fallback_chain`] is what the app uses: the keychain when one can
//! be reached, the key file otherwise, and it says so once.
//!
//! Nothing here ever writes a key (or anything derived from it except its fingerprint, the
//! [`MasterKey::id`]) into a log line or an error message.

use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use sha2::{Digest, Sha256};
use zeroize::{Zeroize, Zeroizing};

/// The length of a master key: AES-256.
pub const MASTER_KEY_LEN: usize = 32;

/// The 256-bit key every secret in the vault is encrypted under.
///
/// Zeroized when dropped. Its `Debug` shows only its [`id`](MasterKey::id).
#[derive(Clone)]
pub struct MasterKey {
    bytes: Zeroizing<[u8; MASTER_KEY_LEN]>,
    id: String,
}

impl MasterKey {
    /// A fresh random key from the operating system's random source.
    pub fn generate() -> Result<MasterKey, KeySourceError> {
        let mut bytes = Zeroizing::new([0u8; MASTER_KEY_LEN]);
        getrandom::fill(bytes.as_mut_slice()).map_err(|e| KeySourceError::Random(e.to_string()))?;
        Ok(MasterKey::from_zeroizing(bytes))
    }

    /// A key from its raw bytes; the argument is wiped once copied.
    pub fn from_bytes(mut bytes: [u8; MASTER_KEY_LEN]) -> MasterKey {
        let key = MasterKey::from_zeroizing(Zeroizing::new(bytes));
        bytes.zeroize();
        key
    }

    fn from_zeroizing(bytes: Zeroizing<[u8; MASTER_KEY_LEN]>) -> MasterKey {
        // A fingerprint, not the key: a truncated hash under a fixed label, so rows can say which
        // key wrote them and the right key can be picked without trying to decrypt.
        let digest = Sha256::new()
            .chain_update(b"feishu-companion master key id v1\0")
            .chain_update(bytes.as_slice())
            .finalize();
        let id = format!("k1-{}", hex::encode(&digest[..8]));
        MasterKey { bytes, id }
    }

    /// The key's fingerprint (`k1-` and 16 hex digits), recorded with every secret it encrypts.
    /// Safe to show and log: it reveals nothing about the key.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn bytes(&self) -> &[u8; MASTER_KEY_LEN] {
        &self.bytes
    }

    /// The key as stored in the keychain and the key file: standard base64.
    fn to_base64(&self) -> Zeroizing<String> {
        // 44 characters; reserved up front so the encoder never reallocates and leaves a copy.
        let mut text = Zeroizing::new(String::with_capacity(64));
        BASE64.encode_string(self.bytes.as_slice(), &mut text);
        text
    }

    /// Parses [`MasterKey::to_base64`]'s text; surrounding whitespace is ignored. The error never
    /// contains the text (which may be most of a key).
    fn from_base64(text: &str, location: &str) -> Result<MasterKey, KeySourceError> {
        let damaged = |problem: &str| KeySourceError::Damaged {
            location: location.to_owned(),
            problem: problem.to_owned(),
        };
        let mut decoded = Zeroizing::new([0u8; MASTER_KEY_LEN + 3]);
        let len = BASE64
            .decode_slice(text.trim().as_bytes(), decoded.as_mut_slice())
            .map_err(|_| damaged("it is not base64 text"))?;
        if len != MASTER_KEY_LEN {
            return Err(damaged(&format!(
                "it holds {len} bytes instead of {MASTER_KEY_LEN}"
            )));
        }
        let mut bytes = Zeroizing::new([0u8; MASTER_KEY_LEN]);
        bytes.copy_from_slice(&decoded[..MASTER_KEY_LEN]);
        Ok(MasterKey::from_zeroizing(bytes))
    }
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MasterKey").field("id", &self.id).finish()
    }
}

/// Why a master key could not be loaded or stored. No variant carries key material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeySourceError {
    /// The keychain cannot be reached at all: no Secret Service on the session bus, no session
    /// bus, a locked or refused keychain, or no answer in time. [`fallback_chain`] falls back to
    /// the key file on this error, and only on this one.
    #[error("{place} is not available: {reason}")]
    Unavailable {
        /// Which keychain.
        place: String,
        /// What it answered, or that it did not answer.
        reason: String,
    },
    /// The keychain answered, but not with one clear key (two entries, an invalid entry, …).
    #[error(
        "{place} could not be used: {reason}. Nothing was changed; check the entry with the system's keychain tool."
    )]
    Keychain {
        /// Which keychain.
        place: String,
        /// What went wrong.
        reason: String,
    },
    /// A key is stored but cannot be a master key. Never replaced automatically: it may be the
    /// only key to existing secrets.
    #[error(
        "the master key in {location} is damaged ({problem}). It has been left untouched; restore it from a backup, or remove it and sign in again to start a new vault."
    )]
    Damaged {
        /// The keychain entry or key file.
        location: String,
        /// What is wrong with it (never its content).
        problem: String,
    },
    /// The key file can be read (or written) by other users.
    #[error(
        "the key file {} can be accessed by other users (permissions {mode:03o}); it must be readable by you only. Run `chmod 600 {}` and start the app again.",
        path.display(),
        path.display()
    )]
    KeyFileTooOpen {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The key file's path names a directory, a link or a device.
    #[error(
        "the key file {} is not a regular file; move it aside and start the app again.",
        path.display()
    )]
    KeyFileNotRegular {
        /// The key file.
        path: PathBuf,
    },
    /// The key file (or its folder) cannot be read or written.
    #[error("cannot {action} the key file {}: {source}", path.display())]
    KeyFileIo {
        /// The key file.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Creating a key was asked where one already exists: it is never replaced.
    #[error("{location} already holds a master key; it is never replaced by a new one")]
    AlreadyExists {
        /// The keychain entry or key file.
        location: String,
    },
    /// The operating system's random source failed.
    #[error("cannot generate a master key: the system's random source failed ({0})")]
    Random(String),
}

/// What the app should tell the user once: the keychain could not be used, so the master key is
/// kept in a key file instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySourceNotice {
    /// The keychain that could not be used.
    pub keychain: String,
    /// Why (the keychain's answer, or that it did not answer).
    pub reason: String,
    /// Where the key is kept instead.
    pub key_file: PathBuf,
}

impl fmt::Display for KeySourceNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is not available ({}), so the key that protects your sign-in is kept in the file {}, readable only by you.",
            self.keychain,
            self.reason,
            self.key_file.display()
        )
    }
}

/// A place a master key is kept.
///
/// Implementations never create a key where one exists: [`create`](MasterKeySource::create) fails
/// with [`KeySourceError::AlreadyExists`] instead, because replacing a key loses every secret
/// encrypted under it.
pub trait MasterKeySource: Send + Sync + fmt::Debug {
    /// Where the key is kept, for people: "the OS keychain (…)", "the key file /home/…".
    fn description(&self) -> String;

    /// The key kept here, if there is one. Never creates one.
    fn load(&self) -> Result<Option<MasterKey>, KeySourceError>;

    /// Generates a key, stores it and returns it; fails if a key is already kept here.
    fn create(&self) -> Result<MasterKey, KeySourceError>;

    /// Every key this source can reach, preferred first. The vault picks the one its secrets were
    /// written with, so a key that exists somewhere is always found before anything new is made.
    fn load_all(&self) -> Result<Vec<MasterKey>, KeySourceError> {
        Ok(self.load()?.into_iter().collect())
    }

    /// The key kept here, created on first use.
    fn load_or_create(&self) -> Result<MasterKey, KeySourceError> {
        match self.load()? {
            Some(key) => Ok(key),
            None => self.create(),
        }
    }

    /// Something the user should be told about where the key is kept, once this source has been
    /// used (see [`FallbackChain`]).
    fn notice(&self) -> Option<KeySourceNotice> {
        None
    }

    /// Moves a key kept here that cannot be loaded out of the way (a key file is renamed, never
    /// deleted), so a new one can be created. A usable key is left alone. Called only once every
    /// secret it could have protected has been deleted ([`crate::Vault::forget_all`]).
    fn set_aside_unusable(&self) -> Result<(), KeySourceError> {
        Ok(())
    }
}

/// The key in memory only, for tests. Clones share the key.
#[derive(Clone, Default)]
pub struct MemoryKeySource {
    key: Arc<Mutex<Option<MasterKey>>>,
}

impl MemoryKeySource {
    /// An empty source: the first [`load_or_create`](MasterKeySource::load_or_create) generates a
    /// key.
    pub fn new() -> MemoryKeySource {
        MemoryKeySource::default()
    }

    /// A source holding `key`.
    pub fn with_key(key: MasterKey) -> MemoryKeySource {
        MemoryKeySource {
            key: Arc::new(Mutex::new(Some(key))),
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<MasterKey>> {
        // Nothing can be left half-done under this lock: a poisoned slot is still consistent.
        self.key
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl fmt::Debug for MemoryKeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let id = self.slot().as_ref().map(|k| k.id().to_owned());
        f.debug_struct("MemoryKeySource")
            .field("key_id", &id)
            .finish()
    }
}

impl MasterKeySource for MemoryKeySource {
    fn description(&self) -> String {
        "a key held in memory".to_owned()
    }

    fn load(&self) -> Result<Option<MasterKey>, KeySourceError> {
        Ok(self.slot().clone())
    }

    fn create(&self) -> Result<MasterKey, KeySourceError> {
        let mut slot = self.slot();
        if slot.is_some() {
            return Err(KeySourceError::AlreadyExists {
                location: self.description(),
            });
        }
        let key = MasterKey::generate()?;
        *slot = Some(key.clone());
        Ok(key)
    }
}

/// The key in a file readable by the user only (mode 0600 on Unix), base64 on one line.
///
/// A file that other users can read is refused, not fixed silently: the key may already have been
/// copied, and the user should know.
#[derive(Debug, Clone)]
pub struct KeyFile {
    path: PathBuf,
}

/// Longer than any key file this code writes; a bigger file is not ours.
const KEY_FILE_MAX: u64 = 1024;

impl KeyFile {
    /// The key file at `path` (created on first use, with its folder).
    pub fn new(path: impl Into<PathBuf>) -> KeyFile {
        KeyFile { path: path.into() }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io_err(&self, action: &'static str) -> impl FnOnce(std::io::Error) -> KeySourceError + '_ {
        move |source| KeySourceError::KeyFileIo {
            path: self.path.clone(),
            action,
            source,
        }
    }

    /// Refuses anything but a regular file that only its owner may access.
    fn check_file(&self, meta: &std::fs::Metadata) -> Result<(), KeySourceError> {
        if !meta.is_file() {
            return Err(KeySourceError::KeyFileNotRegular {
                path: self.path.clone(),
            });
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(KeySourceError::KeyFileTooOpen {
                    path: self.path.clone(),
                    mode,
                });
            }
        }
        // Elsewhere (Windows) the file lives in the user's profile, whose ACL already keeps
        // other users out.
        Ok(())
    }

    /// Writes `key` to a new private file beside the key file, then links it into place: the
    /// key file appears complete or not at all, and an existing one is never overwritten.
    fn write_new(&self, key: &MasterKey) -> Result<bool, KeySourceError> {
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(&dir)
            .map_err(self.io_err("create the folder of"))?;

        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix).map_err(|e| KeySourceError::Random(e.to_string()))?;
        let file_name = self
            .path
            .file_name()
            .map_or_else(|| "key".into(), |n| n.to_string_lossy());
        let tmp = dir.join(format!(".{file_name}.{}.tmp", hex::encode(suffix)));

        let result = self.write_and_link(key, &tmp);
        // The temporary name is only a way in; whatever happened, it must not stay behind.
        let _ = std::fs::remove_file(&tmp);
        let linked = result?;
        if linked {
            // Make the new directory entry durable too, so a power cut cannot lose the key after
            // secrets were written with it.
            #[cfg(unix)]
            if let Ok(dir) = std::fs::File::open(&dir) {
                let _ = dir.sync_all();
            }
        }
        Ok(linked)
    }

    /// Returns false when another key file appeared first (the caller then uses that one).
    fn write_and_link(&self, key: &MasterKey, tmp: &Path) -> Result<bool, KeySourceError> {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(tmp).map_err(self.io_err("create"))?;
        let mut line = key.to_base64();
        line.push('\n');
        file.write_all(line.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(self.io_err("write"))?;
        drop(file);
        match std::fs::hard_link(tmp, &self.path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(self.io_err("create")(e)),
        }
    }
}

impl MasterKeySource for KeyFile {
    fn description(&self) -> String {
        format!("the key file {}", self.path.display())
    }

    fn set_aside_unusable(&self) -> Result<(), KeySourceError> {
        if self.load().is_ok() {
            return Ok(());
        }
        let mut aside = self.path.clone().into_os_string();
        aside.push(format!(".unusable-{}", agent::now_millis()));
        std::fs::rename(&self.path, &aside).map_err(self.io_err("set aside"))?;
        tracing::warn!(from = %self.path.display(), to = %PathBuf::from(&aside).display(), "set an unusable master key file aside");
        Ok(())
    }

    fn load(&self) -> Result<Option<MasterKey>, KeySourceError> {
        // A link could point anywhere, including at a file others can read: refused outright.
        match std::fs::symlink_metadata(&self.path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(KeySourceError::KeyFileNotRegular {
                    path: self.path.clone(),
                });
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io_err("read")(e)),
        }
        let file = std::fs::File::open(&self.path).map_err(self.io_err("open"))?;
        // Checked on the open file, so it is the same file whose content is read.
        let meta = file.metadata().map_err(self.io_err("read"))?;
        self.check_file(&meta)?;
        if meta.len() > KEY_FILE_MAX {
            return Err(KeySourceError::Damaged {
                location: self.description(),
                problem: format!("it is {} bytes long, not one line of base64", meta.len()),
            });
        }
        // Capacity for the whole file up front: reading never reallocates and leaves a copy.
        let mut text = Zeroizing::new(Vec::with_capacity(
            usize::try_from(KEY_FILE_MAX).unwrap_or(1024) + 1,
        ));
        file.take(KEY_FILE_MAX)
            .read_to_end(&mut text)
            .map_err(self.io_err("read"))?;
        let text = std::str::from_utf8(&text).map_err(|_| KeySourceError::Damaged {
            location: self.description(),
            problem: "it is not text".to_owned(),
        })?;
        MasterKey::from_base64(text, &self.description()).map(Some)
    }

    fn create(&self) -> Result<MasterKey, KeySourceError> {
        if self.load()?.is_some() {
            return Err(KeySourceError::AlreadyExists {
                location: self.description(),
            });
        }
        let key = MasterKey::generate()?;
        if self.write_new(&key)? {
            tracing::info!(key_file = %self.path.display(), key_id = key.id(), "created a master key file");
            Ok(key)
        } else {
            // Another process created it between the check and the link: use theirs, so there
            // is still one key.
            self.load()?.ok_or_else(|| KeySourceError::KeyFileIo {
                path: self.path.clone(),
                action: "read back",
                source: std::io::ErrorKind::NotFound.into(),
            })
        }
    }
}

/// The key in the OS keychain through `keyring`: the macOS Keychain, the Windows Credential
/// Manager, or the Secret Service (GNOME Keyring, KWallet, KeePassXC) on Linux; base64 text
/// under service `feishu-companion`, account `master-key`.
///
/// Every call runs on its own thread with a timeout: a keychain that never answers (a hung
/// daemon, an unlock prompt nobody sees) is reported as unavailable instead of freezing the app,
/// and the Secret Service client's own runtime never meets the caller's.
#[derive(Debug, Clone)]
pub struct OsKeychain {
    service: String,
    account: String,
    timeout: Duration,
}

/// The keychain's outcome with `keyring`'s error folded into what the vault acts on; built on
/// the keychain's thread so that `keyring`'s errors (one of which holds the stored bytes) are
/// dropped there.
enum KeychainFailure {
    NoEntry,
    Unavailable(String),
    Damaged(String),
    Other(String),
}

fn fold_keyring_error(err: keyring::Error) -> KeychainFailure {
    match err {
        keyring::Error::NoEntry => KeychainFailure::NoEntry,
        keyring::Error::NoStorageAccess(e) => {
            KeychainFailure::Unavailable(format!("access refused or keychain locked: {e}"))
        }
        keyring::Error::PlatformFailure(e) => KeychainFailure::Unavailable(e.to_string()),
        keyring::Error::BadEncoding(mut bytes) => {
            // These are the stored bytes: wiped, never shown.
            bytes.zeroize();
            KeychainFailure::Damaged("it is not text".to_owned())
        }
        keyring::Error::Ambiguous(entries) => KeychainFailure::Other(format!(
            "{} entries match where there should be one",
            entries.len()
        )),
        other => KeychainFailure::Other(other.to_string()),
    }
}

impl OsKeychain {
    /// The keychain service name.
    pub const SERVICE: &'static str = "feishu-companion";
    /// The keychain account the master key is stored under.
    pub const ACCOUNT: &'static str = "master-key";
    /// How long one keychain call may take before the keychain counts as unavailable. Long
    /// enough for a desktop's unlock prompt to be answered.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    /// The app's entry: service [`Self::SERVICE`], account [`Self::ACCOUNT`].
    pub fn new() -> OsKeychain {
        OsKeychain::with_entry(Self::SERVICE, Self::ACCOUNT)
    }

    /// Another entry: for tests, which must never touch the user's real key.
    pub fn with_entry(service: impl Into<String>, account: impl Into<String>) -> OsKeychain {
        OsKeychain {
            service: service.into(),
            account: account.into(),
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }

    /// Sets how long one call may take.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> OsKeychain {
        self.timeout = timeout;
        self
    }

    /// Removes the entry (true if there was one). Removing the master key makes every stored
    /// secret unreadable: this is for tests and an explicit "forget everything" action only.
    pub fn delete(&self) -> Result<bool, KeySourceError> {
        match self.call(|entry| entry.delete_credential().map_err(fold_keyring_error))? {
            Ok(()) => Ok(true),
            Err(KeychainFailure::NoEntry) => Ok(false),
            Err(failure) => Err(self.failure(failure)),
        }
    }

    /// Runs `op` on the entry on a thread of its own, waiting at most the timeout.
    fn call<T: Send + 'static>(
        &self,
        op: impl FnOnce(keyring::Entry) -> Result<T, KeychainFailure> + Send + 'static,
    ) -> Result<Result<T, KeychainFailure>, KeySourceError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let (service, account) = (self.service.clone(), self.account.clone());
        std::thread::Builder::new()
            .name("keychain".to_owned())
            .spawn(move || {
                let result = keyring::Entry::new(&service, &account)
                    .map_err(fold_keyring_error)
                    .and_then(op);
                // After a timeout nobody listens any more; the result is simply dropped.
                let _ = tx.send(result);
            })
            .map_err(|e| self.unavailable(format!("cannot start a thread for it: {e}")))?;
        match rx.recv_timeout(self.timeout) {
            Ok(result) => Ok(result),
            // The thread is left to finish or hang on its own: a blocked D-Bus call cannot be
            // cancelled from outside, and waiting longer is what the timeout exists to avoid.
            Err(RecvTimeoutError::Timeout) => Err(self.unavailable(format!(
                "it did not answer within {} s",
                self.timeout.as_secs_f32()
            ))),
            Err(RecvTimeoutError::Disconnected) => {
                Err(self.unavailable("its client stopped unexpectedly".to_owned()))
            }
        }
    }

    fn unavailable(&self, reason: String) -> KeySourceError {
        KeySourceError::Unavailable {
            place: self.description(),
            reason,
        }
    }

    fn failure(&self, failure: KeychainFailure) -> KeySourceError {
        match failure {
            KeychainFailure::Unavailable(reason) => self.unavailable(reason),
            KeychainFailure::Damaged(problem) => KeySourceError::Damaged {
                location: self.description(),
                problem,
            },
            KeychainFailure::NoEntry => KeySourceError::Keychain {
                place: self.description(),
                reason: "the entry disappeared while it was being used".to_owned(),
            },
            KeychainFailure::Other(reason) => KeySourceError::Keychain {
                place: self.description(),
                reason,
            },
        }
    }
}

impl Default for OsKeychain {
    fn default() -> OsKeychain {
        OsKeychain::new()
    }
}

impl MasterKeySource for OsKeychain {
    fn set_aside_unusable(&self) -> Result<(), KeySourceError> {
        // A keychain entry cannot be renamed; one that does not hold a key helps nobody.
        if let Err(KeySourceError::Damaged { .. }) = self.load() {
            self.delete()?;
        }
        Ok(())
    }

    fn description(&self) -> String {
        format!(
            "the OS keychain (service {}, account {})",
            self.service, self.account
        )
    }

    fn load(&self) -> Result<Option<MasterKey>, KeySourceError> {
        let text = self.call(|entry| {
            entry
                .get_password()
                .map(Zeroizing::new)
                .map_err(fold_keyring_error)
        })?;
        match text {
            Ok(text) => MasterKey::from_base64(&text, &self.description()).map(Some),
            Err(KeychainFailure::NoEntry) => Ok(None),
            Err(failure) => Err(self.failure(failure)),
        }
    }

    fn create(&self) -> Result<MasterKey, KeySourceError> {
        if self.load()?.is_some() {
            return Err(KeySourceError::AlreadyExists {
                location: self.description(),
            });
        }
        let key = MasterKey::generate()?;
        let text = key.to_base64();
        self.call(move |entry| entry.set_password(&text).map_err(fold_keyring_error))?
            .map_err(|failure| self.failure(failure))?;
        // Read back: some keychains accept a write they do not keep, and a second process may
        // have stored its key in the meantime. Whatever the keychain now holds is the key.
        match self.load()? {
            Some(stored) => {
                if stored.id() == key.id() {
                    tracing::info!(keychain = %self.description(), key_id = key.id(), "created a master key in the keychain");
                } else {
                    tracing::warn!(keychain = %self.description(), key_id = stored.id(), "another process stored a master key first; using it");
                }
                Ok(stored)
            }
            None => Err(KeySourceError::Keychain {
                place: self.description(),
                reason: "it accepted the key but does not return it".to_owned(),
            }),
        }
    }
}

/// The keychain when it can be reached, else the key file: see [`fallback_chain`].
#[derive(Debug)]
pub struct FallbackChain {
    keychain: Box<dyn MasterKeySource>,
    file: KeyFile,
    /// Set the first time the keychain turns out to be unavailable; from then on this chain uses
    /// the key file without asking the keychain again (and without repeating a timeout).
    notice: OnceLock<KeySourceNotice>,
}

/// The app's master key source: the OS keychain, or the key file at `key_file` when no keychain
/// can be reached.
///
/// - A key that exists is always used before anything new is made: when the keychain is
///   reachable but empty and the key file holds a key, the key file's key is used (and the other
///   way round).
/// - The fallback is reported once: [`MasterKeySource::notice`] returns it for the app to show, and
///   one `warn` line is logged (no key material in it).
/// - A key is created only when neither place holds one: in the keychain when it is reachable,
///   in the key file (mode 0600) when it is not.
pub fn fallback_chain(keychain: OsKeychain, key_file: impl Into<PathBuf>) -> FallbackChain {
    FallbackChain::new(Box::new(keychain), KeyFile::new(key_file))
}

/// What the keychain said.
enum Primary {
    Key(MasterKey),
    Empty,
    Unavailable,
}

impl FallbackChain {
    /// A chain over any keychain-like source (tests use one that always fails).
    pub fn new(keychain: Box<dyn MasterKeySource>, file: KeyFile) -> FallbackChain {
        FallbackChain {
            keychain,
            file,
            notice: OnceLock::new(),
        }
    }

    /// The key file this chain falls back to.
    pub fn key_file(&self) -> &KeyFile {
        &self.file
    }

    /// Records that the keychain is unavailable; logs and keeps the notice the first time only.
    fn fall_back(&self, reason: String) {
        let notice = KeySourceNotice {
            keychain: self.keychain.description(),
            reason,
            key_file: self.file.path().to_path_buf(),
        };
        if self.notice.set(notice.clone()).is_ok() {
            tracing::warn!(
                keychain = %notice.keychain,
                reason = %notice.reason,
                key_file = %notice.key_file.display(),
                "no keychain is available; the master key is kept in a key file readable only by this user"
            );
        }
    }

    fn ask_keychain(
        &self,
        op: impl FnOnce() -> Result<Primary, KeySourceError>,
    ) -> Result<Primary, KeySourceError> {
        if self.notice.get().is_some() {
            return Ok(Primary::Unavailable);
        }
        match op() {
            Err(KeySourceError::Unavailable { reason, .. }) => {
                self.fall_back(reason);
                Ok(Primary::Unavailable)
            }
            other => other,
        }
    }

    fn keychain_key(&self) -> Result<Primary, KeySourceError> {
        self.ask_keychain(|| {
            Ok(match self.keychain.load()? {
                Some(key) => Primary::Key(key),
                None => Primary::Empty,
            })
        })
    }
}

impl MasterKeySource for FallbackChain {
    fn set_aside_unusable(&self) -> Result<(), KeySourceError> {
        match self.keychain.load() {
            Ok(_) | Err(KeySourceError::Unavailable { .. }) => {}
            Err(_) => self.keychain.set_aside_unusable()?,
        }
        self.file.set_aside_unusable()
    }

    fn description(&self) -> String {
        format!(
            "{}, or else {}",
            self.keychain.description(),
            self.file.description()
        )
    }

    fn load(&self) -> Result<Option<MasterKey>, KeySourceError> {
        match self.keychain_key()? {
            Primary::Key(key) => Ok(Some(key)),
            Primary::Empty | Primary::Unavailable => self.file.load(),
        }
    }

    fn load_all(&self) -> Result<Vec<MasterKey>, KeySourceError> {
        let mut keys = Vec::new();
        if let Primary::Key(key) = self.keychain_key()? {
            keys.push(key);
        }
        if let Some(key) = self.file.load()?
            && keys.iter().all(|k| k.id() != key.id())
        {
            keys.push(key);
        }
        Ok(keys)
    }

    fn create(&self) -> Result<MasterKey, KeySourceError> {
        // Never a second key: whatever exists in either place wins.
        if self.file.load()?.is_some() {
            return Err(KeySourceError::AlreadyExists {
                location: self.file.description(),
            });
        }
        let created = self.ask_keychain(|| self.keychain.create().map(Primary::Key))?;
        match created {
            Primary::Key(key) => Ok(key),
            // Unreachable now (or it refused the write as unavailable): the key file it is.
            Primary::Empty | Primary::Unavailable => self.file.create(),
        }
    }

    fn notice(&self) -> Option<KeySourceNotice> {
        self.notice.get().cloned()
    }
}
