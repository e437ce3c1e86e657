-- Listings walk the objects in bytewise ARK order, a page at a time
-- (WHERE ark COLLATE "C" > $1 ORDER BY ark COLLATE "C" LIMIT $2), whatever
-- the database's locale. The primary key's index is in the locale's order,
-- which is not bytewise (en-US puts "_" before "a" before "A"); this one
-- is, so a page reads its rows from the index instead of sorting every object.
CREATE INDEX objects_ark_bytewise ON objects (ark COLLATE "C");
