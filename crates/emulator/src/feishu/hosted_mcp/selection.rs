//! Where `selection_with_ellipsis` and `selection_by_title` point in a document, and edits
//! there. Selections are matched against the document's Markdown as `fetch-doc` shows it (the
//! lark-cli skill's examples select `"## 旧标题...旧结尾。"`, heading marks included), so a
//! selection copied from a fetch finds its text.
//!
//! An edit is made on the Markdown of the blocks it touches, which are then converted back;
//! every other block keeps its id. So `replace_all 张三 → 李四` changes words inside a
//! paragraph, and replacing whole blocks replaces blocks.

use std::ops::Range;

use super::super::api::docs::{markdown_to_blocks, rendered_blocks};
use super::super::tenant::Block;

/// Blocks are separated by a blank line, as in `fetch-doc`'s Markdown.
const SEPARATOR: &str = "\n\n";

/// Stands for an escaped `\.\.\.` while a selection is split at its ellipsis.
const LITERAL_DOTS: char = '\u{0}';

/// A byte range of [`Layout::text`] and the Markdown that replaces it.
pub(super) type Edit = (Range<usize>, String);

/// A document's Markdown and where each rendered block lies in it.
#[derive(Debug)]
pub(super) struct Layout {
    pub(super) text: String,
    spans: Vec<Span>,
}

#[derive(Debug)]
struct Span {
    /// Index in the document's blocks.
    block: usize,
    /// Byte range in [`Layout::text`].
    range: Range<usize>,
    /// 1–9 for a heading.
    heading: Option<usize>,
}

/// What a selection asks for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Selection {
    /// `start...end`: from the first `start` to the next `end` after it.
    Range(String, String),
    /// Text without an ellipsis: exactly that.
    Exact(String),
    /// `## Title` (a level) or `Title` (any level): the heading and its section.
    Title(Option<usize>, String),
}

impl Selection {
    /// `selection_with_ellipsis`: `\.\.\.` is three literal dots.
    pub(super) fn with_ellipsis(text: &str) -> Selection {
        let masked = text.replace(r"\.\.\.", &LITERAL_DOTS.to_string());
        let unmask = |s: &str| s.replace(LITERAL_DOTS, "...");
        match masked.split_once("...") {
            Some((start, end)) if !start.is_empty() && !end.is_empty() => {
                Selection::Range(unmask(start), unmask(end))
            }
            Some((start, end)) => {
                Selection::Exact(unmask(if start.is_empty() { end } else { start }))
            }
            None => Selection::Exact(unmask(&masked)),
        }
    }

    /// `selection_by_title`.
    pub(super) fn by_title(text: &str) -> Selection {
        let text = text.trim();
        let hashes = text.chars().take_while(|c| *c == '#').count();
        if (1..=9).contains(&hashes) {
            Selection::Title(Some(hashes), text[hashes..].trim().to_owned())
        } else {
            Selection::Title(None, text.to_owned())
        }
    }
}

impl Layout {
    pub(super) fn of(blocks: &[Block]) -> Layout {
        let mut text = String::new();
        let mut spans = Vec::new();
        for (block, markdown) in rendered_blocks(blocks) {
            if !spans.is_empty() {
                text.push_str(SEPARATOR);
            }
            let start = text.len();
            text.push_str(&markdown);
            let heading = blocks
                .get(block)
                .map(|b| b.block_type)
                .filter(|t| (3..=11).contains(t))
                .and_then(|t| usize::try_from(t - 2).ok());
            spans.push(Span {
                block,
                range: start..text.len(),
                heading,
            });
        }
        Layout { text, spans }
    }

    /// Every match of `selection`, in order, not overlapping.
    pub(super) fn find(&self, selection: &Selection) -> Vec<Range<usize>> {
        match selection {
            Selection::Title(level, title) => self.sections(*level, title),
            Selection::Exact(needle) => self.occurrences(needle, None),
            Selection::Range(start, end) => self.occurrences(start, Some(end)),
        }
    }

    fn occurrences(&self, start: &str, end: Option<&str>) -> Vec<Range<usize>> {
        let mut found = Vec::new();
        let mut from = 0;
        while !start.is_empty() && from <= self.text.len() {
            let Some(at) = self.text[from..].find(start).map(|i| i + from) else {
                break;
            };
            let after = at + start.len();
            let stop = match end {
                None => after,
                Some(end) => match self.text[after..].find(end) {
                    Some(i) => after + i + end.len(),
                    None => break,
                },
            };
            found.push(at..stop);
            from = stop;
        }
        found
    }

    fn sections(&self, level: Option<usize>, title: &str) -> Vec<Range<usize>> {
        let mut found = Vec::new();
        for (k, span) in self.spans.iter().enumerate() {
            let Some(own) = span.heading else { continue };
            let text = self.text[span.range.clone()].trim_start_matches('#').trim();
            if text != title || level.is_some_and(|l| l != own) {
                continue;
            }
            // The section runs to the next heading of the same or a higher level.
            let last = self.spans[k + 1..]
                .iter()
                .position(|s| s.heading.is_some_and(|h| h <= own))
                .map_or(self.spans.len() - 1, |i| k + i);
            found.push(span.range.start..self.spans[last].range.end);
        }
        found
    }

    /// The rendered blocks (first, last) a match touches.
    fn touched(&self, range: &Range<usize>) -> Option<(usize, usize)> {
        let last_span = self.spans.len().checked_sub(1)?;
        let first = self
            .spans
            .iter()
            .position(|s| s.range.end > range.start)
            .unwrap_or(last_span);
        let last = self
            .spans
            .iter()
            .rposition(|s| s.range.start < range.end)
            .unwrap_or(first)
            .max(first);
        Some((first, last))
    }

    /// The blocks a match touches: (index in the document, its Markdown).
    pub(super) fn blocks_of(&self, range: &Range<usize>) -> Vec<(usize, &str)> {
        self.touched(range)
            .map(|(first, last)| {
                self.spans[first..=last]
                    .iter()
                    .map(|s| (s.block, &self.text[s.range.clone()]))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Where new blocks go before (`after` false) or after a match, as a block index.
    pub(super) fn insertion_point(&self, range: &Range<usize>, after: bool) -> usize {
        match self.touched(range) {
            Some((_, last)) if after => self.spans[last].block + 1,
            Some((first, _)) => self.spans[first].block,
            None => 0,
        }
    }

    /// Replaces each range (in order, not overlapping) with its Markdown; the blocks each
    /// touches are converted back from their edited Markdown.
    pub(super) fn apply(
        &self,
        blocks: &mut Vec<Block>,
        edits: Vec<Edit>,
        next_id: &mut dyn FnMut() -> String,
    ) {
        // Edits touching the same blocks are made together.
        let mut groups: Vec<((usize, usize), Vec<Edit>)> = Vec::new();
        for (range, markdown) in edits {
            let Some((first, last)) = self.touched(&range) else {
                continue;
            };
            match groups.last_mut() {
                Some(((_, group_last), members)) if first <= *group_last => {
                    *group_last = (*group_last).max(last);
                    members.push((range, markdown));
                }
                _ => groups.push(((first, last), vec![(range, markdown)])),
            }
        }
        // From the end, so the block indices of earlier groups stay right.
        for ((first, last), members) in groups.into_iter().rev() {
            let outer = self.spans[first].range.start..self.spans[last].range.end;
            let mut local = self.text[outer.clone()].to_owned();
            for (range, markdown) in members.into_iter().rev() {
                let start = range.start.clamp(outer.start, outer.end) - outer.start;
                let end = range.end.clamp(outer.start, outer.end) - outer.start;
                local.replace_range(start..end.max(start), &markdown);
            }
            let converted = markdown_to_blocks(&local, next_id);
            blocks.splice(self.spans[first].block..=self.spans[last].block, converted);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn blocks(markdown: &str) -> Vec<Block> {
        let mut n = 0;
        markdown_to_blocks(markdown, &mut || {
            n += 1;
            format!("b{n}")
        })
    }

    #[test]
    fn ellipses_split_once_and_escaped_dots_stay() {
        assert_eq!(
            Selection::with_ellipsis("开头...结尾"),
            Selection::Range("开头".into(), "结尾".into())
        );
        assert_eq!(
            Selection::with_ellipsis(r"你好\.\.\.世界"),
            Selection::Exact("你好...世界".into())
        );
        assert_eq!(
            Selection::by_title("## 功能"),
            Selection::Title(Some(2), "功能".into())
        );
    }

    #[test]
    fn a_title_selects_its_section_and_words_change_in_place() {
        let mut doc = blocks("## 一\n\n张三说\n\n### 细节\n\n张三又说\n\n## 二\n\n尾");
        let layout = Layout::of(&doc);
        let section = layout.find(&Selection::by_title("## 一"));
        assert_eq!(section.len(), 1);
        let ids: Vec<&str> = layout.blocks_of(&section[0]).iter().map(|b| b.1).collect();
        assert_eq!(ids, ["## 一", "张三说", "### 细节", "张三又说"]);
        let names = layout.find(&Selection::with_ellipsis("张三"));
        assert_eq!(names.len(), 2);
        let edits = names.into_iter().map(|r| (r, "李四".to_owned())).collect();
        layout.apply(&mut doc, edits, &mut || "new".to_owned());
        let after = Layout::of(&doc);
        assert_eq!(
            after.text,
            "## 一\n\n李四说\n\n### 细节\n\n李四又说\n\n## 二\n\n尾"
        );
        assert_eq!(doc[0].block_id, "b1", "untouched blocks keep their ids");
        assert_eq!(doc[1].block_id, "new");
    }
}
