--! Previous: sha1:c497294a80c724340423dcf4207f71624207041d
--! Hash: sha1:f34673a97bbcd2dc60a6f48dd160600259b05e8d
--! Message: A completed booking's window, date and time are final

-- A completed booking is final (docs/rest-api.md, "Booking status graph"): its status could not
-- move, yet PATCH could still move its window, or its date and time, into any slot, full ones
-- included (a completed booking holds no seat). Its time is now final too: SBTR9 (409
-- invalid_transition), as for a status move the graph forbids.
create or replace function app.tg_bookings__completed_final()
 returns trigger
 language plpgsql
as $function$
begin
  if (new.window_start, new.scheduled_date, new.scheduled_time) is distinct from (old.window_start, old.scheduled_date, old.scheduled_time) then
    perform app.raise('SBTR9', 'A completed booking is final: its window, date and time cannot change',
      jsonb_build_object('from', old.status, 'to', new.status, 'allowed', to_jsonb(app.booking_allowed_moves(old.status))));
  end if;
  return new;
end
$function$;
comment on function app.tg_bookings__completed_final() is E'Refuses a change of a completed booking''s window, date or time (SBTR9).';

drop trigger if exists _210_completed_final on app.bookings;
create trigger _210_completed_final BEFORE UPDATE OF window_start, scheduled_date, scheduled_time ON app.bookings FOR EACH ROW
  WHEN (old.status = 'completed') EXECUTE FUNCTION app.tg_bookings__completed_final();
