"""rollouts: routing plans next to the production alias, their history of steps, verdicts per window

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 20:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('rollout_plans',
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('mode', sa.String(length=20), nullable=False),
    sa.Column('plan', sa.JSON(), nullable=False),
    sa.Column('production_version', sa.String(length=100), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('model', name=op.f('pk_rollout_plans'))
    )
    op.create_table('rollout_steps',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('by', sa.String(length=20), nullable=False),
    sa.Column('action', sa.String(length=20), nullable=False),
    sa.Column('from_plan', sa.JSON(), nullable=True),
    sa.Column('to_plan', sa.JSON(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rollout_steps'))
    )
    with op.batch_alter_table('rollout_steps', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_rollout_steps_model'), ['model'], unique=False)
    op.create_table('rollout_verdicts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('candidate', sa.String(length=100), nullable=False),
    sa.Column('window_start_ms', sa.BigInteger(), nullable=False),
    sa.Column('window_end_ms', sa.BigInteger(), nullable=False),
    sa.Column('verdict', sa.String(length=20), nullable=False),
    sa.Column('reasons', sa.JSON(), nullable=False),
    sa.Column('evaluated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rollout_verdicts')),
    sa.UniqueConstraint('model', 'candidate', 'window_start_ms', name=op.f('uq_rollout_verdicts_model'))
    )


def downgrade() -> None:
    op.drop_table('rollout_verdicts')
    with op.batch_alter_table('rollout_steps', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_rollout_steps_model'))
    op.drop_table('rollout_steps')
    op.drop_table('rollout_plans')
