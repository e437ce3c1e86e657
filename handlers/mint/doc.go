// Package mint is ingestq's built-in ARK minter. Identifiers have the form
// ark:/<naan>/<shoulder><id><check>, following the NOID conventions: <id>
// is a counter written in the 29-character "betanumeric" alphabet (digits
// and consonants except l, so no vowels spell words and l is not mistaken
// for 1), and <check> is the NOID check character, which catches every
// single-character typo and every transposition of two adjacent characters.
//
// The counters live in ZooKeeper so that every host sharing it mints from
// the same sequence. Each mint advances the counter and records the job's
// ARK in one transaction, which makes minting idempotent per job: a daemon
// that crashed after minting gets the same ARK again instead of burning a
// second identifier for the same object.
//
// Nodes, under an optional root:
//
//	/ingestq/minter/<naan>-<shoulder>  last number minted, decimal text;
//	                                   never delete it, or numbers are reused
//	/ingestq/minted/<jid>              the job's ARK, until Forget
package mint
