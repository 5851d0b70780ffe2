// The ranks, groups and links of a tp × pp layout, as plain data (SGLang parallel_state.py initialize_model_parallel:
// world = tp_size · pp_size ranks, global rank = pp_rank · tp_size + tp_rank; a TP group per stage; a PP group per TP
// rank, here its point-to-point links from each stage to the next). Made once — in-process handles on the thread that
// starts the ranks, or Gloo refs that every node derives alike — and handed to each rank as its PpRankInit.
import type { MessagePort } from 'node:worker_threads';
import type { GroupRef, LinkEnd } from '../distributed/index.js';
import type { PipelineStage } from '../layers/index.js';

/** Every group and link of a layout. */
export interface PpLayout {
  readonly tpSize: number;
  readonly ppSize: number;
  /** All tp·pp ranks: the start-up barrier. */
  readonly world: GroupRef;
  /** Per stage: its TP group (the model's collectives). */
  readonly tp: readonly GroupRef[];
  /** Stage 0's ranks: the step channel global rank 0 sends each micro-batch on (null when tp = 1). */
  readonly step0: GroupRef | null;
  /** [stage s][tp rank t]: the link from (s, t) to (s + 1, t), s < pp − 1. */
  readonly links: readonly (readonly { readonly send: LinkEnd; readonly recv: LinkEnd }[])[];
  /** From the last stage's TP rank 0 to global rank 0: the samples. */
  readonly results: { readonly send: LinkEnd; readonly recv: LinkEnd };
}

/**
 * Builds a layout from two factories (in-process: createLocalGroup / createLocalLink; across nodes: the bootstrap's
 * Gloo refs). Group and link names are the same on every node, so Gloo ranks meet.
 */
export function makePpLayout(
  tpSize: number, ppSize: number,
  group: (name: string, size: number) => GroupRef,
  link: (name: string) => { send: LinkEnd; recv: LinkEnd },
): PpLayout {
  return {
    tpSize,
    ppSize,
    world: group('world', tpSize * ppSize),
    tp: Array.from({ length: ppSize }, (_, s) => group(`tp_stage${s}`, tpSize)),
    step0: tpSize > 1 ? group('pp_step0', tpSize) : null,
    links: Array.from({ length: ppSize - 1 }, (_, s) => Array.from({ length: tpSize }, (_, t) => link(`pp_link_${s}to${s + 1}_tp${t}`))),
    results: link('pp_results'),
  };
}

/** A rank's part of the pipeline (in TpRankInit.pp). */
export interface PpRankInit {
  readonly stage: PipelineStage;
  /** Stage 0, TP rank > 0: the step channel it receives micro-batches on (rank index = its TP rank). */
  readonly step0: GroupRef | null;
  /** Stages > 0: the receiving end of the link from the previous stage's same TP rank. */
  readonly prev: LinkEnd | null;
  /** Stages < pp − 1: the sending end of the link to the next stage's same TP rank. */
  readonly next: LinkEnd | null;
  /** The last stage's TP rank 0: the sending end of the results link to global rank 0. */
  readonly results: LinkEnd | null;
}

/** Rank `rank`'s part (global rank = stage · tp + tp rank). */
export function ppRankInit(layout: PpLayout, rank: number, stages: readonly PipelineStage[]): PpRankInit {
  const tp = layout.tpSize;
  const s = Math.floor(rank / tp);
  const t = rank % tp;
  const last = s === layout.ppSize - 1;
  return {
    stage: stages[s],
    step0: s === 0 && t > 0 ? layout.step0 : null,
    prev: s > 0 ? layout.links[s - 1][t].recv : null,
    next: !last ? layout.links[s][t].send : null,
    results: last && t === 0 ? layout.results.send : null,
  };
}

/** The link ends a rank holds (to open, to break on a failure). */
export function ppLinkEnds(pp: PpRankInit | undefined): LinkEnd[] {
  return pp ? [pp.prev, pp.next, pp.results].filter((e): e is LinkEnd => e !== null) : [];
}

/** The MessagePorts inside a rank's in-process link ends (a worker's transferList). */
export function ppPorts(pp: PpRankInit | undefined): MessagePort[] {
  return ppLinkEnds(pp).flatMap((e) => (e.backend === 'port' ? [e.port] : []));
}
