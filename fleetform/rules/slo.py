"""Rules of sizing from an SLO (fleetform/slo.py, issue 23): the SLO says enough to size the replicas, some
shape of the catalog meets it, and the blueprint's own instance type and tensor_parallel do."""

from __future__ import annotations

from ..model import Blueprint
from . import UNIQUE_NAMES, Reporter, rule
from .inference import _inference


def _models(bp: Blueprint):
    for fleet in _inference(bp):
        for model in fleet.models:
            if model.slo is not None:
                yield fleet, model


@rule("slo-inputs", "error",
      "an SLO gives a measured qps_per_gpu, or all an estimate needs and a model it can estimate")
def slo_inputs(bp: Blueprint, report: Reporter) -> None:
    from ..slo import ROOFLINE_FIELDS

    for fleet, model in _models(bp):
        slo = model.slo
        given = [n for n in ROOFLINE_FIELDS[:3] if getattr(slo, n) is not None]
        missing = [n for n in ROOFLINE_FIELDS if getattr(slo, n) is None]
        if slo.qps_per_gpu is None and not given:
            report(slo.path, f"model '{model.name}': the SLO gives no qps_per_gpu and nothing to estimate it from",
                   "give a measured qps_per_gpu, or input_tokens, output_tokens, itl_s and ttft_p90_s for fleetform "
                   "to estimate it (plan shows the estimate)")
        elif given and missing:
            report(slo.path, f"model '{model.name}': the SLO estimate needs {', '.join(missing)} beside "
                   f"{', '.join(given)}", f"add {', '.join(missing)} to slo, or remove {', '.join(given)}")
        elif not missing and model.context_tokens is not None and \
                slo.input_tokens + slo.output_tokens > model.context_tokens:
            report(slo.path + ("input_tokens",), f"model '{model.name}': a request of {slo.input_tokens:,} + "
                   f"{slo.output_tokens:,} tokens is longer than the {model.context_tokens:,} tokens vLLM serves "
                   "(max_model_len): vLLM refuses it", "raise max_model_len, or lower input_tokens or output_tokens")
        elif slo.qps_per_gpu is None and model.spec is None:
            report(slo.path, f"model '{model.name}': {model.model} is not in fleetform's model catalog, so the SLO "
                   "estimate has no attention layout (layers, KV heads) to size the KV cache from",
                   "give a measured qps_per_gpu (fleetform catalog --models lists the models it can estimate)")
        elif slo.qps_per_gpu is None and fleet.gpu_sharing.strategy != "none":
            report(slo.path, f"model '{model.name}': the SLO estimate is of whole GPUs, and the fleet shares them "
                   f"({fleet.gpu_sharing.strategy})", "give a measured qps_per_gpu for a shared GPU")
        elif slo.qps_per_gpu is None and (model.pipeline_parallel > 1 or fleet.shape is not None
                                          and model.tensor_parallel > fleet.shape.gpu_count):
            # the roofline is of one node's replica: pipeline stages and a replica spanning nodes (a LeaderWorkerSet
            # group) add bubbles and inter-node transfers it does not model
            report(slo.path, f"model '{model.name}': the SLO estimate is of a replica on one node without pipeline "
                   f"parallel, and this one is TP {model.tensor_parallel} x PP {model.pipeline_parallel}",
                   "give a measured qps_per_gpu for the multi-node replica (vllm bench serve against one group)")


def _estimates(bp: Blueprint):
    """(fleet, model, SloSizing) of every model sized by the estimate (no measured qps_per_gpu)."""
    from ..slo import for_model

    for fleet, model in _models(bp):
        if model.slo.qps_per_gpu is not None:
            continue  # measured: it overrides the estimate (plan still shows the estimate beside it)
        sized = for_model(fleet, model)
        if sized is not None:
            yield fleet, model, sized


def _shape(c) -> str:
    e = c.estimate
    return f"{c.instance_type} with TP {e.tp}"


@rule("slo-unmet", "error", "some instance type and tensor_parallel of the catalog meets the model's SLO (estimated)",
      needs=(UNIQUE_NAMES, "slo-inputs", "model-fits"))
def slo_unmet(bp: Blueprint, report: Reporter) -> None:
    from ..slo import closest

    for fleet, model, sized in _estimates(bp):
        pool = sized.candidates or [sized.chosen]
        if any(c.estimate.meets for c in pool):
            continue
        near = closest(pool, sized.workload)
        w = sized.workload
        scope = (f"any of the {len(sized.candidates)} instance types x tensor_parallel of the catalog that hold it"
                 if sized.candidates else f"the fleet's {sized.chosen.instance_type}")
        report(model.slo.path, f"model '{model.name}': no shape meets the SLO (ITL {w.itl_s * 1000:g} ms, TTFT "
               f"{w.ttft_s * 1000:g} ms for {w.input_tokens:,} in / {w.output_tokens:,} out tokens) on {scope}; "
               f"the closest, {_shape(near)}, misses: {near.estimate.why}",
               "relax itl_s or ttft_p90_s, shorten input_tokens, or serve a smaller or lower-precision model "
               "(plan shows the estimate)")


@rule("slo-shape", "warning", "the blueprint's instance type and tensor_parallel meet the model's SLO (estimated)",
      needs=(UNIQUE_NAMES, "slo-inputs", "model-fits"))
def slo_shape(bp: Blueprint, report: Reporter) -> None:
    for fleet, model, sized in _estimates(bp):
        chosen, best = sized.chosen, sized.cheapest
        if chosen.estimate.meets or not any(c.estimate.meets for c in sized.candidates or [chosen]):
            continue  # met, or slo-unmet reports that nothing meets it
        hint = (f"the cheapest shape that meets it is {_shape(best)}: {best.replicas} replica(s) on {best.nodes} "
                f"node(s), ${best.usd_hour:,.2f}/h (plan ranks the candidates)" if best is not None else
                "plan ranks the shapes that meet it")
        report(model.path + ("tensor_parallel",), f"model '{model.name}': {_shape(chosen)} does not meet the SLO: "
               f"{chosen.estimate.why}", hint)
