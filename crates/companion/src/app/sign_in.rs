//! The facade of signing in: who is signed in, signing in and out, and what Feishu's page said.

use super::Companion;
use crate::error::CompanionError;
use crate::person::Person;

impl Companion {
    /// The person the app last signed in as, whether or not the sign-in still holds.
    pub fn person(&self) -> Result<Option<Person>, CompanionError> {
        crate::person::person(&self.ctx)
    }
}
