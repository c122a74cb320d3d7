//! Text that reaches people: URLs without their passwords, untrusted text
//! (step outputs, model text, ids a client chose) made safe to print on a
//! terminal, and an id made one segment of a URL path. Pure functions;
//! printing is the callers'.

/// `text` as one URL path segment or query value: every byte but the
/// unreserved ones (RFC 3986) percent-encoded, so a thread id holding `/`,
/// `?`, `%`, `&` or spaces stays one segment.
pub fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `url` with its password replaced by `***`: the userinfo's (`u:pw@host`)
/// and a `password=` query parameter's. Works on text that does not parse
/// as a URL too (a password with `/` or `@` in it), so no caller leaks a
/// password by falling back to the text as given.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return redact_query(url);
    };
    let start = scheme_end + 3;
    // The authority ends at the last `@` before any query or fragment: a
    // password may hold `/` or `@` unescaped.
    let before_query = url[start..]
        .find(['?', '#'])
        .map_or(url.len(), |i| start + i);
    let out = match url[start..before_query].rfind('@') {
        Some(at) => {
            let userinfo = &url[start..start + at];
            match userinfo.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..start],
                    &userinfo[..colon],
                    &url[start + at..]
                ),
                None => url.to_owned(),
            }
        }
        None => url.to_owned(),
    };
    redact_query(&out)
}

/// A `password=` query parameter's value replaced by `***`.
fn redact_query(url: &str) -> String {
    let Some(q) = url.find('?') else {
        return url.to_owned();
    };
    let params: Vec<String> = url[q + 1..]
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => p.to_owned(),
        })
        .collect();
    format!("{}?{}", &url[..q], params.join("&"))
}

/// A duration as people read it, one rule for every place Cairn prints
/// one (the CLI's tables, the console's pages): `12 ms`, `1.2 s`,
/// `3 min 4 s`, `2 h 5 min`, `3 d 4 h`; a negative one reads as 0.
pub fn duration_ms(ms: i64) -> String {
    const MIN: i64 = 60_000;
    const HOUR: i64 = 60 * MIN;
    const DAY: i64 = 24 * HOUR;
    let ms = ms.max(0);
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{:.1} s", ms as f64 / 1000.0),
        _ if ms < HOUR => format!("{} min {} s", ms / MIN, (ms % MIN) / 1000),
        _ if ms < DAY => format!("{} h {} min", ms / HOUR, (ms % HOUR) / MIN),
        _ => format!("{} d {} h", ms / DAY, (ms % DAY) / HOUR),
    }
}

/// Whether `c` is a Unicode format character (general category Cf: the
/// zero-width space and joiners, bidirectional overrides and isolates,
/// the soft hyphen, the byte-order mark, ...): invisible, or reordering
/// what follows, so two names that differ by one look the same. The
/// table is Unicode 15's Cf ranges.
pub fn is_format(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061C}'
            | '\u{06DD}'
            | '\u{070F}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08E2}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{110BD}'
            | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0001}'
            | '\u{E0020}'..='\u{E007F}'
    )
}

/// `text` safe to print on a terminal: every control character other than
/// `\n` and `\t` (ESC, BEL, CR, backspace, C1 controls, ...) is shown as a
/// `\u{..}` escape instead of being sent, so printed text cannot move the
/// cursor, clear the screen, set the window title or forge a line.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// [`printable`] for one-line fields (ids, statuses, a table cell): a
/// newline or tab is escaped too, so a value cannot start a line of its
/// own.
pub fn printable_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| match c.is_control() {
                true => c.escape_unicode().to_string(),
                false => c.to_string(),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(url: &str, expected: &str) {
        assert_eq!(redact_url(url), expected);
    }

    #[test]
    fn passwords_are_redacted_whether_or_not_the_url_parses() {
        check(
            "postgres://u:secret@db:5432/x",
            "postgres://u:***@db:5432/x",
        );
        check("http://u:p/w@ss@host/path", "http://u:***@host/path");
        check("http://host:7700/v1", "http://host:7700/v1");
        check("http://user@host/", "http://user@host/");
        check(
            "postgres://db/x?user=u&password=pw&sslmode=require",
            "postgres://db/x?user=u&password=***&sslmode=require",
        );
        check("sqlite://cairn.db", "sqlite://cairn.db");
        check("not a url:pw@x", "not a url:pw@x");
    }

    #[test]
    fn control_characters_are_escaped_but_lines_and_tabs_kept() {
        assert_eq!(printable("a\nb\tc"), "a\nb\tc");
        assert_eq!(
            printable("\u{1b}]0;owned\u{7}x\r"),
            "\\u{1b}]0;owned\\u{7}x\\u{d}"
        );
        assert_eq!(printable("\u{9b}2J"), "\\u{9b}2J");
        assert_eq!(printable_line("t\nforged"), "t\\u{a}forged");
    }
}
