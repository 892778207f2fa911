"""params.yaml -> typed configs, validated before any compute: the one reader of params.yaml.

Every error names the key it comes from (``methods.isogclr.rho: ...``), so a bad ablation fails in a second
instead of after an hour of training. The parts, each a module of this package (import a name from the module
that defines it: ``from isogclr.config.core import run_config``):

* :mod:`.core`: the shared sections (model, augment, train, probe, methods, data) and a unimodal run's config;
* :mod:`.overlay`: a dotted key of params.yaml or a method's knobs applied to a resolved run config (a study's
  value, ``train.by_dataset``, a selection), and the check that a method's arguments build its loss;
* :mod:`.selection`: a tuned run's selection (``tuning/<method>/selected.json``) as an overlay, and a grid run;
* :mod:`.typed`: :class:`ConfigError` and the checks of a value by type, with its key;
* :mod:`.profiles`: reading params.yaml and the profiles (overlays merged onto the profile they extend);
* :mod:`.keys`: the keys params.yaml may hold, at every level, and the names and seeds it may give;
* :mod:`.studies`: one-knob studies and the epochs a run resolves;
* :mod:`.bimodal`: the image-text runs;
* :mod:`.tuning`: the selection on a validation split (``tuning``, ``bimodal_tuning``) and its candidate runs;
* :mod:`.plan`: every run a profile defines, with its folder and resolved config;
* :mod:`.sections`: the typed sections the report notebooks read (table grids, temperatures, the profile);
* :mod:`.convergence`: EMC2's convergence study;
* :mod:`.datasets`: the generated datasets' sections (what the data commands generate);

and :mod:`.validate`: :func:`validate_params`, which checks them all, and :func:`missing_datasets`.

The package itself defines nothing, so a run imports (and its pipeline stage depends on) the parts it uses,
not every section's reader.
"""
