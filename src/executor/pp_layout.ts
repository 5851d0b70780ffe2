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
  /**
   * Prefill CP inside each stage (--enable-prefill-cp): C, and per stage its attn_tp groups ([k], null when
   * attn_tp = tp / C is 1) and CP groups ([i]) — the TP-only layout's (tp_runner.ts) once per stage.
   */
  readonly cp: { readonly size: number; readonly attn: readonly (readonly (GroupRef | null)[])[]; readonly group: readonly (readonly GroupRef[])[] } | null;
}

/**
 * Builds a layout from two factories (in-process: createLocalGroup / createLocalLink; across nodes: the bootstrap's
 * Gloo refs). Group and link names are the same on every node, so Gloo ranks meet. The link factory gets the link's
 * sending and receiving global ranks (so a cross-node end can name its peer in errors).
 */
export function makePpLayout(
  tpSize: number, ppSize: number,
  group: (name: string, size: number) => GroupRef,
  link: (name: string, fromRank: number, toRank: number) => { send: LinkEnd; recv: LinkEnd },
  cpSize = 1,
): PpLayout {
  const a = tpSize / cpSize;
  return {
    cp: cpSize > 1 ? {
      size: cpSize,
      attn: Array.from({ length: ppSize }, (_, s) => Array.from({ length: cpSize }, (_, k) => (a > 1 ? group(`attn_tp_stage${s}_${k}`, a) : null))),
      group: Array.from({ length: ppSize }, (_, s) => Array.from({ length: a }, (_, i) => group(`attn_cp_stage${s}_${i}`, cpSize))),
    } : null,
    tpSize,
    ppSize,
    world: group('world', tpSize * ppSize),
    tp: Array.from({ length: ppSize }, (_, s) => group(`tp_stage${s}`, tpSize)),
    step0: tpSize > 1 ? group('pp_step0', tpSize) : null,
    links: Array.from({ length: ppSize - 1 }, (_, s) => Array.from({ length: tpSize }, (_, t) => link(`pp_link_${s}to${s + 1}_tp${t}`, s * tpSize + t, (s + 1) * tpSize + t))),
    results: link('pp_results', (ppSize - 1) * tpSize, 0),
  };
}

/** "PP stage s TP rank t (rank g)": how messages name global rank `rank` of a layout with `tpSize` ranks per stage. */
export function ppRankName(rank: number, tpSize: number): string {
  return `PP stage ${Math.floor(rank / tpSize)} TP rank ${rank % tpSize} (rank ${rank})`;
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

/** Rank `rank`'s prefill-CP groups (TpRankInit.cp; TP rank t: attn_tp group ⌊t / attn_tp⌋, CP group t mod attn_tp). */
export function ppRankCp(layout: PpLayout, rank: number): { size: number; attn: GroupRef | null; group: GroupRef } | undefined {
  const cp = layout.cp;
  if (!cp) return undefined;
  const s = Math.floor(rank / layout.tpSize);
  const t = rank % layout.tpSize;
  const a = layout.tpSize / cp.size;
  return { size: cp.size, attn: cp.attn[s][Math.floor(t / a)], group: cp.group[s][t % a] };
}

/** Every group of a layout (to break them all on a failure). */
export function ppLayoutGroups(layout: PpLayout): GroupRef[] {
  const cp = layout.cp ? [...layout.cp.attn.flat().filter((g): g is GroupRef => g !== null), ...layout.cp.group.flat()] : [];
  return [layout.world, ...layout.tp, ...(layout.step0 ? [layout.step0] : []), ...cp];
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
