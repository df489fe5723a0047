//! The cards in Feishu that still wait for a decision, kept in the data folder so that after a
//! restart the app updates them (a call decided or expired meanwhile) instead of forgetting them,
//! and does not send a second card for a call that still waits. Only the message ids are kept, for
//! the app (Open API base and App ID) that sent them; another app's cards are not its bot's to
//! update.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct KeptCards {
    /// The Open API base the cards were sent through.
    pub(super) open: String,
    /// The app whose bot sent them.
    pub(super) app_id: String,
    /// Call id → message id, for cards that still show buttons.
    pub(super) cards: BTreeMap<String, String>,
    /// The summary of the calls held back by the cap, while it shows its button.
    #[serde(default)]
    pub(super) summary: Option<super::summary::SummaryCard>,
}

/// The kept cards of the app `key`; none when the file is missing, unreadable or another app's.
pub(super) fn load(path: &Path, key: &(String, String)) -> KeptCards {
    let Ok(bytes) = std::fs::read(path) else {
        return KeptCards::default();
    };
    match serde_json::from_slice::<KeptCards>(&bytes) {
        Ok(kept) if kept.open == key.0 && kept.app_id == key.1 => kept,
        Ok(_) => KeptCards::default(),
        Err(e) => {
            tracing::warn!(error = %e, "the kept Feishu cards cannot be read; starting without them");
            KeptCards::default()
        }
    }
}

/// Writes the kept cards (a temporary file renamed over the old one, so a crash never leaves half
/// a file).
pub(super) fn save(path: &Path, kept: &KeptCards) {
    let Ok(text) = serde_json::to_vec_pretty(kept) else {
        return;
    };
    let temp = path.with_extension("json.tmp");
    let result = std::fs::write(&temp, text).and_then(|()| std::fs::rename(&temp, path));
    if let Err(e) = result {
        tracing::warn!(error = %e, "cannot keep the Feishu cards");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn kept_cards_come_back_only_for_the_app_that_sent_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cards.json");
        let key = ("https://open.feishu.cn/".to_owned(), "cli_a".to_owned());
        assert_eq!(load(&path, &key), KeptCards::default(), "no file yet");
        let kept = KeptCards {
            open: key.0.clone(),
            app_id: key.1.clone(),
            cards: BTreeMap::from([("fc_1".to_owned(), "om_1".to_owned())]),
            summary: Some(super::super::summary::SummaryCard {
                message_id: "om_2".into(),
                count: 2,
                lines: vec!["约评审会".into()],
            }),
        };
        save(&path, &kept);
        assert_eq!(load(&path, &key), kept);
        assert_eq!(
            load(&path, &(key.0.clone(), "cli_b".to_owned())),
            KeptCards::default()
        );
        // A file kept before summaries existed still reads.
        std::fs::write(
            &path,
            serde_json::json!({"open": key.0, "app_id": key.1, "cards": {"fc_1": "om_1"}})
                .to_string(),
        )
        .unwrap();
        assert_eq!(load(&path, &key).cards.len(), 1);
        std::fs::write(&path, b"{not json").unwrap();
        assert_eq!(
            load(&path, &key),
            KeptCards::default(),
            "a damaged file starts afresh"
        );
    }
}
