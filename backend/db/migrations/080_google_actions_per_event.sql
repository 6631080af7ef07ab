-- Google pixels map conversion actions per event type (`conversionActions`) instead of sending
-- every event to one `conversionAction`. An existing pixel keeps its one action for every event
-- type (`*`), exactly what it sent before: none starts sending an event it did not send, and none
-- stops. `pixel update --conversion-action EVENT=ACTION_ID` then splits it (docs/platforms/google.md).
UPDATE pixels
   SET public_config = (public_config - 'conversionAction')
       || jsonb_build_object('conversionActions', jsonb_build_object('*', public_config->>'conversionAction'))
 WHERE platform = 'google'
   AND public_config ? 'conversionAction'
   AND NOT public_config ? 'conversionActions';
