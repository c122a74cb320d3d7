//! The SSE decoder's tests: the parsing rules one table row each, a sample
//! stream cut at every byte position (and every pair of positions), the cap,
//! and the stream adapter.

use std::task::{Context, Poll, Waker};

use futures_util::stream::{self, Stream, StreamExt};

use super::*;

fn ev(event: &str, data: &str, id: &str) -> Event {
    Event {
        event: event.to_owned(),
        data: data.to_owned(),
        id: id.to_owned(),
    }
}

/// Feeds `chunks` to a fresh decoder: the events and the first error.
fn decode_with(decoder: &mut Decoder, chunks: &[&[u8]]) -> (Vec<Event>, Option<SseError>) {
    let mut out = Vec::new();
    for chunk in chunks {
        if let Err(e) = decoder.feed(chunk, &mut out) {
            return (out, Some(e));
        }
    }
    (out, None)
}

fn decode(stream: &[u8]) -> Vec<Event> {
    let (events, error) = decode_with(&mut Decoder::new(), &[stream]);
    assert_eq!(error, None);
    events
}

#[test]
fn the_parsing_rules() {
    let m = |data: &str| ev("message", data, "");
    #[rustfmt::skip]
    let table: Vec<(&str, &[u8], Vec<Event>)> = vec![
        ("one data line", b"data: hello\n\n", vec![m("hello")]),
        ("data lines join with \\n", b"data: a\ndata: b\n\n", vec![m("a\nb")]),
        ("no space after the colon", b"data:x\n\n", vec![m("x")]),
        ("only one space is dropped", b"data:  x \n\n", vec![m(" x ")]),
        ("a tab is kept", b"data:\tx\n\n", vec![m("\tx")]),
        ("a colon in the value", b"data: a: b\n\n", vec![m("a: b")]),
        ("a field without a colon", b"data\n\n", vec![m("")]),
        ("empty data lines", b"data\ndata\n\n", vec![m("\n")]),
        ("a trailing empty data line", b"data: a\ndata:\n\n", vec![m("a\n")]),
        ("comments are ignored", b": hi\ndata: a\n:\n\n", vec![m("a")]),
        ("a comment alone dispatches nothing", b": keep-alive\n\n", vec![]),
        ("unknown fields are ignored", b"foo: bar\ndata: a\nDATA: b\n\n", vec![m("a")]),
        ("a named event", b"event: delta\ndata: a\n\n", vec![ev("delta", "a", "")]),
        ("the last event field wins", b"event: a\nevent: b\ndata: x\n\n", vec![ev("b", "x", "")]),
        ("an empty event field means message", b"event:\ndata: x\n\n", vec![m("x")]),
        ("the type is per event", b"event: a\ndata: 1\n\ndata: 2\n\n", vec![ev("a", "1", ""), m("2")]),
        ("no data: no event, type forgotten", b"event: a\n\ndata: 2\n\n", vec![m("2")]),
        ("blank lines alone", b"\n\n\r\n\r", vec![]),
        ("CRLF endings", b"data: a\r\ndata: b\r\n\r\n", vec![m("a\nb")]),
        ("CR endings", b"data: a\rdata: b\r\r", vec![m("a\nb")]),
        ("mixed endings", b"data: a\r\ndata: b\rdata: c\n\r\n", vec![m("a\nb\nc")]),
        ("CR CR is a blank line", b"data: a\r\r\n", vec![m("a")]),
        ("LF CR is a blank line", b"data: a\n\r", vec![m("a")]),
        ("the id is kept", b"id: 1\ndata: a\n\ndata: b\n\n", vec![ev("message", "a", "1"), ev("message", "b", "1")]),
        ("an id alone dispatches nothing", b"id: 1\n\ndata: b\n\n", vec![ev("message", "b", "1")]),
        ("an empty id resets it", b"id: 1\ndata: a\n\nid\ndata: b\n\n", vec![ev("message", "a", "1"), m("b")]),
        ("an id with NUL is ignored", b"id: 1\ndata: a\n\nid: 2\0\ndata: b\n\n", vec![ev("message", "a", "1"), ev("message", "b", "1")]),
        ("an unfinished event is dropped", b"data: a\n\ndata: b\n", vec![m("a")]),
        ("an unfinished line is dropped", b"data: a\n\ndata: b", vec![m("a")]),
        ("a BOM first is dropped", b"\xEF\xBB\xBFdata: a\n\n", vec![m("a")]),
        ("a second BOM is not", b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n", vec![m("b")]),
        ("UTF-8", "data: héllo, 世界 😀\n\n".as_bytes(), vec![m("héllo, 世界 😀")]),
        ("invalid UTF-8 becomes U+FFFD", b"data: a\xFFb\n\n", vec![m("a\u{FFFD}b")]),
        ("a field name is exact", b"data : a\n data: b\ndata: c\n\n", vec![m("c")]),
    ];
    for (what, stream, expect) in table {
        assert_eq!(decode(stream), expect, "{what}");
    }
}

#[test]
fn retry_takes_digits_only() {
    let table: [(&[u8], Option<u64>); 7] = [
        (b"retry: 1500\n", Some(1500)),
        (b"retry:0\n", Some(0)),
        (b"retry: 15s\n", None),
        (b"retry: -1\n", None),
        (b"retry:\n", None),
        (b"retry: 1 \n", None),
        (b"retry: 99999999999999999999999\n", None),
    ];
    for (stream, expect) in table {
        let mut d = Decoder::new();
        let (events, error) = decode_with(&mut d, &[stream]);
        assert!(events.is_empty() && error.is_none());
        assert_eq!(d.retry(), expect, "{}", String::from_utf8_lossy(stream));
    }
    let mut d = Decoder::new();
    decode_with(&mut d, &[b"retry: 10\nretry: x\n"]);
    assert_eq!(d.retry(), Some(10), "an invalid retry keeps the last");
}

/// A stream with every rule a chunk boundary can disturb: a BOM, CRLF,
/// lone CR and LF endings, multi-byte UTF-8, comments, a lone `\r` before
/// a line, an unfinished event at the end.
const SAMPLE: &[u8] = b"\xEF\xBB\xBF: comment\r\nevent: greet\r\n\
data: h\xC3\xA9llo \xF0\x9F\x98\x80\rdata:two\n\nid: 7\ndata\r\n\r\n: x\n\
retry: 1500\nevent: e\n\ndata: last\r\rdata: \xE4\xB8\x96\r\n\r\ndata: unfinished\n";

fn sample_expected() -> Vec<Event> {
    vec![
        ev("greet", "héllo 😀\ntwo", ""),
        ev("message", "", "7"),
        ev("message", "last", "7"),
        ev("message", "世", "7"),
    ]
}

#[test]
fn the_sample_whole() {
    let mut d = Decoder::new();
    let (events, error) = decode_with(&mut d, &[SAMPLE]);
    assert_eq!(error, None);
    assert_eq!(events, sample_expected());
    assert_eq!(d.retry(), Some(1500));
}

#[test]
fn the_sample_cut_at_every_byte() {
    for at in 0..=SAMPLE.len() {
        let (a, b) = SAMPLE.split_at(at);
        let (events, error) = decode_with(&mut Decoder::new(), &[a, b]);
        assert_eq!((events, error), (sample_expected(), None), "cut at {at}");
    }
}

#[test]
fn the_sample_cut_at_every_two_bytes() {
    for i in 0..=SAMPLE.len() {
        for j in i..=SAMPLE.len() {
            let chunks = [&SAMPLE[..i], &SAMPLE[i..j], &SAMPLE[j..]];
            let (events, error) = decode_with(&mut Decoder::new(), &chunks);
            assert_eq!(
                (events, error),
                (sample_expected(), None),
                "cut at {i} and {j}"
            );
        }
    }
}

#[test]
fn the_sample_byte_by_byte() {
    let chunks: Vec<&[u8]> = SAMPLE.chunks(1).collect();
    let mut d = Decoder::new();
    let (events, error) = decode_with(&mut d, &chunks);
    assert_eq!((events, error), (sample_expected(), None));
    assert_eq!(d.retry(), Some(1500));
}

#[test]
fn a_cr_at_a_chunk_end_then_empty_chunks() {
    let chunks: [&[u8]; 5] = [b"data: a\r", b"", b"\n", b"\r", b"\n"];
    let (events, error) = decode_with(&mut Decoder::new(), &chunks);
    assert_eq!((events, error), (vec![ev("message", "a", "")], None));
    // A CR, then a chunk that does not start with LF: two line endings.
    let chunks: [&[u8]; 2] = [b"data: a\r", b"\rdata: b\n\n"];
    let (events, _) = decode_with(&mut Decoder::new(), &chunks);
    assert_eq!(events, vec![ev("message", "a", ""), ev("message", "b", "")]);
}

#[test]
fn an_event_over_the_cap_is_an_error_and_stays_one() {
    // A line without an end grows the buffer: it fails at the cap.
    let mut d = Decoder::with_max_event_bytes(16);
    let (events, error) = decode_with(&mut d, &[b"data: 0123456", b"789abcdef"]);
    assert!(events.is_empty());
    assert_eq!(error, Some(SseError::TooLarge { cap: 16 }));
    let (_, again) = decode_with(&mut d, &[b"\n\ndata: ok\n\n"]);
    assert_eq!(again, Some(SseError::TooLarge { cap: 16 }));

    // Short lines add up in one event's data.
    let mut d = Decoder::with_max_event_bytes(16);
    let (events, error) = decode_with(
        &mut d,
        &[b"data: 1\n\ndata: 12345\ndata: 12345\ndata: 12345\n"],
    );
    assert_eq!(
        events,
        vec![ev("message", "1", "")],
        "the event before the error is given"
    );
    assert_eq!(error, Some(SseError::TooLarge { cap: 16 }));

    // Exactly at the cap is allowed; the cap is per event.
    let mut d = Decoder::with_max_event_bytes(16);
    let sixteen = b"data: 0123456789\n\ndata: 0123456789\n\n";
    let (events, error) = decode_with(&mut d, &[sixteen]);
    assert_eq!(error, None);
    assert_eq!(events.len(), 2);

    // Comments count while buffered, as any line does.
    let mut d = Decoder::with_max_event_bytes(16);
    let (_, error) = decode_with(&mut d, &[b": 0123456789abcdef\n"]);
    assert_eq!(error, Some(SseError::TooLarge { cap: 16 }));
    assert_eq!(
        error.map(|e| e.to_string()).as_deref(),
        Some("a server-sent event is over the cap of 16 bytes")
    );
}

/// Polls `s` to its end; every item of the test streams is ready at once.
fn collect<S: Stream + Unpin>(mut s: S) -> Vec<S::Item> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut items = Vec::new();
    loop {
        match s.poll_next_unpin(&mut cx) {
            Poll::Ready(Some(item)) => items.push(item),
            Poll::Ready(None) => return items,
            Poll::Pending => panic!("a test stream is never pending"),
        }
    }
}

#[test]
fn events_over_a_stream_of_chunks() {
    let chunks: Vec<Result<Vec<u8>, String>> = SAMPLE.chunks(7).map(|c| Ok(c.to_vec())).collect();
    let events = collect(Box::pin(events(stream::iter(chunks), Decoder::new())));
    let events: Vec<Event> = events.into_iter().map(Result::unwrap).collect();
    assert_eq!(events, sample_expected());
}

#[test]
fn a_body_error_ends_the_stream_after_the_events_before_it() {
    let chunks: Vec<Result<&[u8], String>> = vec![
        Ok(b"data: a\n\ndata: b\n"),
        Err("connection reset".to_owned()),
        Ok(b"\n"),
    ];
    let items = collect(Box::pin(events(stream::iter(chunks), Decoder::new())));
    assert_eq!(items.len(), 2);
    assert!(matches!(&items[0], Ok(e) if e.data == "a"));
    assert!(matches!(&items[1], Err(StreamError::Body(e)) if e == "connection reset"));
    assert_eq!(
        items[1].as_ref().err().map(|e| e.to_string()).as_deref(),
        Some("connection reset")
    );
}

#[test]
fn an_event_over_the_cap_ends_the_stream_after_the_events_before_it() {
    let chunks: Vec<Result<&[u8], String>> =
        vec![Ok(b"data: a\n\ndata: 0123456789abcdef"), Ok(b"data: b\n\n")];
    let items = collect(Box::pin(events(
        stream::iter(chunks),
        Decoder::with_max_event_bytes(16),
    )));
    assert_eq!(items.len(), 2);
    assert!(matches!(&items[0], Ok(e) if e.data == "a"));
    assert!(matches!(
        &items[1],
        Err(StreamError::Sse(SseError::TooLarge { cap: 16 }))
    ));
}
