--! Previous: sha1:652a318c26c97b4928304c1cf36295fb286c9672
--! Hash: sha1:0298c978cf34fc222c99900fd07b677ceb43d4d0
--! Message: inlinable JSON helpers

-- to_char() is only STABLE, so helpers wrapping it were mis-declared IMMUTABLE; PostgreSQL then
-- refuses to inline them and runs each as a separate function call per row (about 0.1 ms per
-- list item). Declared honestly they inline into the list queries.
alter function app.iso(timestamptz) stable;
alter function app.cursor_encode(timestamptz, uuid) stable;
alter function app.page_item(timestamptz, uuid, jsonb) stable;
