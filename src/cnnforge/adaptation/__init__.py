"""cnnforge adapt: a model with ops the device lacks becomes one it runs (module surgery from one
table, a width multiplier where size is the wall, recovery by distillation), and the accuracy it
costs is measured. See docs/adapt.md."""
