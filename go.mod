module github.com/ingestq/ingestq

go 1.26.8

require (
	github.com/go-zookeeper/zk v1.0.4
	github.com/google/uuid v1.6.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/lmittmann/tint v1.2.1
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9 // indirect
)
