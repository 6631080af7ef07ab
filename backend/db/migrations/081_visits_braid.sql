-- Google's click ids for iOS traffic: `gbraid` (app) and `wbraid` (web) arrive instead of a
-- gclid on landing URLs; a conversion is uploaded with one of them when it has no gclid.
ALTER TABLE visits ADD COLUMN gbraid text, ADD COLUMN wbraid text;
