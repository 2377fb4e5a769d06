--! Previous: sha1:0b60d477908ab2034190ebf9a0910f3c06856997
--! Hash: sha1:03631089890d84a86aabb5b03253a8eaf84467fa
--! Message: idempotency key grace

-- ==== Idempotency-Key: a key just released is taken ====
-- app.idempotency_begin tries the key's lock for up to 40 ms before answering 409 (docs/api-contract.md §5).
CREATE OR REPLACE FUNCTION app.idempotency_begin(token_hash text, location_ref text, scope text, idempotency_key text, fingerprint text, OUT replayed_status integer, OUT replayed_body text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  loc uuid := app.idempotency_location(token_hash);
  k app_private.idempotency_keys;
begin
  if idempotency_key is null or length(idempotency_key) not between 1 and 255 then
    perform app.raise('SB400', 'Idempotency-Key must be 1 to 255 characters');
  end if;
  -- An unknown token: the operation's own app.authorize answers 401 and nothing is stored.
  if loc is null then
    return;
  end if;
  -- The token's own location, as app.authorize pins it (RLS on the keys).
  perform set_config('app.location_id', loc::text, true);
  -- Concurrent duplicates: the first holds this lock until its transaction ends; the others answer
  -- 409 instead of waiting for it, and a retry after the commit finds the stored answer. The lock
  -- is tried for up to 40 ms: a request whose error the client has already read may still be
  -- releasing it (a backend reports the error before it ends the transaction), and a client that
  -- retries at once with a corrected body must not get a spurious 409.
  for attempt in 1..5 loop
    exit when pg_try_advisory_xact_lock(7302, hashtext(loc::text || '/' || idempotency_key));
    if attempt = 5 then
      perform app.authorize(token_hash, location_ref, scope);
      perform app.raise('SBIK9', 'A request with this Idempotency-Key is still being processed; retry after it has finished');
    end if;
    perform pg_sleep(0.01);
  end loop;
  select * into k from app_private.idempotency_keys i
   where i.location_id = loc and i.idempotency_key = idempotency_begin.idempotency_key;
  if found and k.created_at <= now() - interval '24 hours' then
    -- Expired (not pruned yet): the key is free again.
    delete from app_private.idempotency_keys i where i.location_id = loc and i.idempotency_key = idempotency_begin.idempotency_key;
  elsif found then
    -- A stored answer goes only to a request the operation itself would have let through.
    perform app.authorize(token_hash, location_ref, scope);
    if k.fingerprint <> idempotency_begin.fingerprint then
      perform app.raise('SBIK2', 'This Idempotency-Key was already used for a different request');
    end if;
    -- The answer held a caller's data that has since been erased: neither replayed nor run again.
    if k.erased_at is not null then
      perform app.raise('SBIK7', 'The answer stored under this Idempotency-Key held personal data that has since been erased; it is not replayed and the request is not run again. Use a new key to repeat the request.');
    end if;
    replayed_status := k.response_status;
    replayed_body := k.response_body;
  end if;
  -- Nothing stored: the operation runs and authorizes (401, 404, 403 roll everything back).
end
$function$;
comment on function app.idempotency_begin(text,text,text,text,text) is E'First half of a token-API POST with an Idempotency-Key: takes the key of the token''s location for the transaction (409 idempotency_key_in_use while another request holds it) and returns the stored answer of the same request (null when there is none: the operation then runs and authorizes itself), or refuses another request''s key (422 idempotency_key_reused) or an answer erased with its caller''s data (410 idempotency_answer_erased); both after app.authorize with the operation''s scope. docs/rest-api.md "Idempotency-Key".';
revoke execute on function app.idempotency_begin(text,text,text,text,text) from public;
grant execute on function app.idempotency_begin(text,text,text,text,text) to switchboard_api;
