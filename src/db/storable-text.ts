/**
 * Text PostgreSQL can store. Its text and jsonb hold neither a NUL nor a UTF-16 surrogate without
 * its pair (`JSON.stringify` writes one as `\ud83d`, which json and jsonb refuse). Request bodies
 * are refused or cleaned with these (src/http/body.ts, src/http/platform/raw.ts); what a receiver
 * or provider answered is cleaned before it is recorded (src/net/post.ts, src/notify/send.ts).
 */

/** A high surrogate without its low one after it, or a low one without its high one before it. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** A NUL, or a surrogate without its pair. */
export const UNSTORABLE = new RegExp(`\\u0000|${LONE_SURROGATE.source}`);

/** `text` as PostgreSQL can store it: NULs dropped, unpaired surrogates replaced by U+FFFD. */
export function storableText(text: string): string {
  return text.replaceAll('\u0000', '').replace(LONE_SURROGATE, '\uFFFD');
}
