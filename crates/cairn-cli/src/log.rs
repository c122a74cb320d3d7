//! The log's fields, escaped: every value is written with its control
//! characters (newlines, carriage returns, escapes) spelled out (`\n`,
//! `\u{1b}`), so a client's text logged by `cairn serve` or `cairn worker`
//! (a key, an operator's name, a reason, an error naming them) stays on its
//! one line and cannot forge another.

use std::fmt::{self, Write};

use tracing_subscriber::field::MakeExt;
use tracing_subscriber::fmt::format::{debug_fn, Writer};
use tracing_subscriber::fmt::FormatFields;

/// The field formatter of every log line: `message` as written, other
/// fields as `name=value`, separated by spaces, each value escaped.
pub fn fields() -> impl for<'w> FormatFields<'w> + Send + Sync + 'static {
    debug_fn(
        |w: &mut Writer<'_>, field: &tracing::field::Field, value: &dyn fmt::Debug| {
            if field.name() != "message" {
                write!(w, "{}=", field.name())?;
            }
            escaped(w, &format!("{value:?}"))
        },
    )
    .delimited(" ")
}

/// Writes `text` with each control character spelled out.
fn escaped(w: &mut impl Write, text: &str) -> fmt::Result {
    for c in text.chars() {
        match c {
            '\n' => w.write_str("\\n")?,
            '\r' => w.write_str("\\r")?,
            '\t' => w.write_str("\\t")?,
            c if c.is_control() => write!(w, "\\u{{{:x}}}", u32::from(c))?,
            c => w.write_char(c)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    fn escaped(text: &str) -> String {
        let mut out = String::new();
        let _ = super::escaped(&mut out, text);
        out
    }

    #[test]
    fn control_characters_are_spelled_out() {
        assert_eq!(escaped("ops\nFORGED"), "ops\\nFORGED");
        assert_eq!(escaped("a\r\x1b[31mb\t"), "a\\r\\u{1b}[31mb\\t");
        assert_eq!(escaped("plain é"), "plain é");
    }
}
